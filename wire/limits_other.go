//go:build !unix

package wire

// supportedMaxConns: without an open-file limit to read, --maxConns
// stands as given, as mongod on Windows.
func supportedMaxConns() int { return 0 }
