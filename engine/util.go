package engine

// int32OrInt64 returns n as int32 when it fits (as mongod reports small
// counts), else int64.
func int32OrInt64(n int64) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return n
}
