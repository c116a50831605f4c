package mongoerr

// OutOfDiskSpace is what writes get while the data directory's filesystem
// is short of space (error_codes.yml: 14031 OutOfDiskSpace).
const OutOfDiskSpace = 14031

func init() {
	names[OutOfDiskSpace] = "OutOfDiskSpace"
}
