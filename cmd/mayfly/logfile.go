package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/mlog"
)

// logFileFlags are mongod's --logpath, --logappend and --logRotate.
func logFileFlags(fs *flag.FlagSet) (path *string, appendMode *bool, rotate *string) {
	path = fs.String("logpath", "", "write the log to this file instead of stderr (SIGUSR1 and the logRotate command rotate it)")
	appendMode = fs.Bool("logappend", false, "append to an existing --logpath file instead of renaming it aside at startup")
	rotate = fs.String("logRotate", "rename", "what rotation does with --logpath: rename (to FILE.<UTC timestamp>, then open a new FILE) or reopen (close and reopen FILE; needs --logappend)")
	return path, appendMode, rotate
}

// logFile is the rotatable --logpath file; nil when logging to stderr.
type rotatableLog struct{ *mlog.File }

// openLogPath opens --logpath, or returns dflt (stderr or the configuration
// file's systemLog.path) without one. The exit code
// is exitOK unless the options are bad or the file cannot be opened.
func openLogPath(path string, appendMode bool, rotate string, dflt, stderr io.Writer) (io.Writer, *rotatableLog, int) {
	if rotate != "rename" && rotate != "reopen" {
		fmt.Fprintf(stderr, "mayfly: Unsupported value for logRotate option: %s\n", rotate)
		return nil, nil, exitBadOptions
	}
	if path == "" {
		return dflt, nil, exitOK
	}
	if rotate == "reopen" && !appendMode {
		// mongod: "logRotate param 'reopen' requires logAppend to be set".
		fmt.Fprintf(stderr, "mayfly: logRotate param 'reopen' requires logAppend to be set\n")
		return nil, nil, exitBadOptions
	}
	f, err := mlog.OpenFile(path, appendMode, rotate == "reopen")
	if err != nil {
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		return nil, nil, exitFailure
	}
	return f, &rotatableLog{f}, exitOK
}

// rotateFunc is the logRotate command's and SIGUSR1's hook. Like mongod's
// rotateLogs it logs "Log rotation initiated" (23166) even when logging to
// stderr, where there is nothing to rotate and it succeeds.
func (lf *rotatableLog) rotateFunc(log *zap.Logger) func() error {
	return func() error {
		log.Info("Log rotation initiated")
		if lf == nil {
			return nil
		}
		return lf.Rotate()
	}
}

// rotateOnSIGUSR1 rotates the log file on SIGUSR1, as mongod does. The
// signal is caught even without a log file, so that it does not kill the
// process (Go's default for SIGUSR1).
func rotateOnSIGUSR1(lf *rotatableLog, log *zap.Logger) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	done := make(chan struct{})
	rotate := lf.rotateFunc(log)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				if err := rotate(); err != nil {
					log.Warn("log rotation failed", zap.Error(err))
				}
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
