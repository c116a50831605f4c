// Command mayfly runs the mayfly server: a MongoDB-compatible document
// database. Flags follow mongod's where mongod has one (--bind_ip, --port,
// --dbpath), so that muscle memory and scripts carry over.
//
// Logs go to stderr; stdout stays empty except for --version and --help,
// so that the binary composes in pipelines.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/mlog"
	"github.com/mayflydb/mayfly/server"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/wire"
)

// Exit codes. mongod's are reused where it has one, so that supervisors
// written for mongod read them the same way.
const (
	exitOK         = 0
	exitFailure    = 1
	exitBadOptions = 2
	exitAddrInUse  = 48  // mongod exits 48 when it cannot bind its port
	exitDBPathLock = 100 // mongod exits 100 when the dbpath is locked by another mongod
)

// shutdownTimeout bounds how long a signal waits for requests in flight.
const shutdownTimeout = 10 * time.Second

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bind       = fs.String("bind", "127.0.0.1", "address to listen on")
		port       = fs.Int("port", 27017, "port to listen on (0 picks a free one)")
		dbpath     = fs.String("dbpath", "./data", "data directory (created if missing)")
		logLevel   = fs.String("log-level", "info", "log level: debug|info|warn|error")
		logFormat  = fs.String("log-format", "console", "log format: json|console")
		reaperRate = fs.Int("reaper-rate", 0, "maximum TTL deletions per second (0 = unlimited)")
		commitMS   = fs.Int("journalCommitInterval", 100, "milliseconds between syncs of the write-ahead log (1-500): the most a crash loses of writes acknowledged without j: true")
		maxConns   = fs.Int("maxConns", wire.DefaultMaxConns, "maximum number of simultaneous connections (at most 80% of the open-file limit)")
		version    = fs.Bool("version", false, "print the version and exit")
		netComp    = fs.String("networkMessageCompressors", wire.DefaultCompressors, "compressors for wire messages, negotiated through hello: a comma-separated list of snappy, zstd, zlib, or disabled")
		metrics    = fs.String("metrics-listen", "", "address (host:port) to serve Prometheus /metrics, /healthz and /readyz on (empty = off)")
		auth       = fs.Bool("auth", false, "require authentication: every command but the handshake needs a user with the privileges it requires")
		authMechs  = fs.String("authenticationMechanisms", "SCRAM-SHA-1,SCRAM-SHA-256", "comma-separated SASL mechanisms clients may authenticate with")
		histHours  = fs.Float64("change-history-hours", 24, "replica-set mode: hours the change history (change streams' resume window) keeps a change")
		replSet    = fs.String("replSet", "", "run as the primary of a one-member replica set with this name (sessions, retryable writes, cluster time); empty: a standalone")
		advertise  = fs.String("advertise-host", "", "host:port this server calls itself in a replica set (hello's me, primary and hosts; the address clients connect to); default: the bind address when it is one concrete address, else this machine's hostname, with the port")
	)
	fs.StringVar(bind, "bind_ip", "127.0.0.1", "same as --bind (mongod's spelling)")
	verbose := newVerbosityFlags(fs)
	tlsOpts := tlsFlags(fs)
	minFree := fs.String("min-free-disk", "256MiB", "refuse writes (error 14031 OutOfDiskSpace) while the data directory's filesystem has less free space than this: bytes, a size (256MiB, 1GB) or a percentage (5%); 0 refuses only when the disk is full")
	logPath, logAppend, logRotate := logFileFlags(fs) // logfile.go
	ballast := fs.String("ballast-size", "1GiB", "size of the emergency ballast file <dbpath>/auxiliary/EMERGENCY_BALLAST to delete when the disk is full: bytes, a size or a percentage; capped at 1% of the filesystem unless set; 0 keeps none")
	cacheMB := fs.Int("cacheSizeMB", 0, "size of the storage engine's block cache (Pebble's) in MiB; 0 = 256 MiB (the configuration file also takes mongod's storage.wiredTiger.engineConfig.cacheSizeGB)")
	storageKind := fs.String("storage", "pebble", "where documents are stored: pebble, the embedded store under --dbpath (the only one this mayfly has)")
	cf := configFlags(fs)
	// --help goes to stdout (it was asked for); usage after a flag error
	// goes to stderr. flag prints usage itself before returning ErrHelp, so
	// the writer is chosen up front.
	wantHelp := false
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			wantHelp = true
		}
	}
	if wantHelp {
		fs.SetOutput(stdout)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mayfly [flags]\n\nmayfly is a MongoDB-compatible document database server.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitBadOptions
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mayfly: unexpected arguments: %v\n", fs.Args())
		return exitBadOptions
	}
	if *version {
		fmt.Fprintf(stdout, "mayfly (MongoDB %s compatible)\n", engine.Version)
		return exitOK
	}
	if code := cf.load(fs, stderr); code >= 0 {
		return code
	}
	if *commitMS < 1 || *commitMS > 500 {
		fmt.Fprintf(stderr, "mayfly: invalid --journalCommitInterval %d: must be between 1 and 500 milliseconds\n", *commitMS)
		return exitBadOptions
	}
	maxConnsSet := isFlagSet(fs, "maxConns")
	if maxConnsSet && *maxConns < wire.MinMaxConns {
		// mongod refuses the same, as BadValue at startup.
		fmt.Fprintf(stderr, "mayfly: maxConns has to be at least %d\n", wire.MinMaxConns)
		return exitBadOptions
	}
	if *cacheMB < 0 || *cacheMB > maxCacheSizeMB {
		fmt.Fprintf(stderr, "mayfly: invalid --cacheSizeMB %d: must be between 1 and %d (0 = the default, 256)\n", *cacheMB, maxCacheSizeMB)
		return exitBadOptions
	}
	if *storageKind != "pebble" {
		fmt.Fprintf(stderr, "mayfly: --storage %q is not supported: this mayfly stores only in its embedded Pebble under --dbpath (--storage pebble)\n", *storageKind)
		return exitBadOptions
	}
	if _, err := wire.ParseCompressors(*netComp); err != nil {
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		return exitBadOptions
	}
	if err := tlsOpts.Validate(); err != nil {
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		return exitBadOptions
	}
	for _, f := range []struct{ name, v string }{{"min-free-disk", *minFree}, {"ballast-size", *ballast}} {
		if _, err := pebblekv.ParseDiskSize(f.v); err != nil {
			fmt.Fprintf(stderr, "mayfly: invalid --%s: %v\n", f.name, err)
			return exitBadOptions
		}
	}
	// The default ballast is capped at 1% of the filesystem; a size given
	// on the command line is taken as is.
	ballastSize := *ballast
	if !isFlagSet(fs, "ballast-size") {
		ballastSize = ""
	}
	rootUser, rootPwd := os.Getenv("MAYFLY_INITDB_ROOT_USERNAME"), os.Getenv("MAYFLY_INITDB_ROOT_PASSWORD")
	if (rootUser == "") != (rootPwd == "") {
		fmt.Fprintln(stderr, "mayfly: MAYFLY_INITDB_ROOT_USERNAME and MAYFLY_INITDB_ROOT_PASSWORD must be set together")
		return exitBadOptions
	}
	if rootUser != "" {
		*auth = true // as the mongo image does with MONGO_INITDB_ROOT_USERNAME
	}
	var mechs []string
	for _, m := range strings.Split(*authMechs, ",") {
		if m = strings.TrimSpace(m); m != "" {
			if m != "SCRAM-SHA-1" && m != "SCRAM-SHA-256" {
				fmt.Fprintf(stderr, "mayfly: authenticationMechanisms: unsupported mechanism %q (SCRAM-SHA-1 and SCRAM-SHA-256 are)\n", m)
				return exitBadOptions
			}
			mechs = append(mechs, m)
		}
	}
	logOut, logFile, code := openLogPath(*logPath, *logAppend, *logRotate, cf.logWriter(stderr), stderr) // logfile.go
	if code != exitOK {
		return code
	}
	if logFile == nil && cf.logFile != nil {
		logFile = &rotatableLog{cf.logFile}
	} else if logFile != nil {
		defer logFile.Close()
	}
	// Verbosity: -v… on the command line, else systemLog.verbosity, else
	// --log-level debug (1).
	level := 0
	if *logLevel == "debug" {
		level = 1
	}
	if cf.verbositySet && !isFlagSet(fs, "log-level") {
		level = cf.verbosity
	}
	if n := verbose.level(); n > 0 {
		level = n
	}
	verb := mlog.NewVerbosity(level)
	log, err := newLogger(*logLevel, *logFormat, logOut, verb)
	if err != nil {
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		return exitBadOptions
	}
	stopRotate := rotateOnSIGUSR1(logFile, log)
	defer stopRotate()
	defer log.Sync() //nolint:errcheck // stderr sync errors are meaningless

	parsed := map[string]any{"net.bindIp": *bind, "net.port": int32(*port), "storage.dbPath": *dbpath}
	if *reaperRate != 0 {
		parsed["ttl.reaperRate"] = int32(*reaperRate)
	}
	if isFlagSet(fs, "journalCommitInterval") {
		parsed["storage.journal.commitIntervalMs"] = int32(*commitMS)
	}
	if maxConnsSet {
		parsed["net.maxIncomingConnections"] = int32(*maxConns)
	}
	if verbose.level() > 0 {
		parsed["systemLog.verbosity"] = int32(verbose.level())
	}
	if isFlagSet(fs, "cacheSizeMB") {
		parsed["mayfly.cacheSizeMB"] = int32(*cacheMB)
	}
	if isFlagSet(fs, "storage") {
		parsed["mayfly.storage"] = *storageKind
	}
	if isFlagSet(fs, "networkMessageCompressors") {
		parsed["net.compression.compressors"] = *netComp
	}
	tlsOpts.AddParsed(parsed)
	cf.addParsed(parsed)
	if *auth {
		parsed["security.authorization"] = "enabled"
	}
	if isFlagSet(fs, "authenticationMechanisms") {
		parsed["setParameter.authenticationMechanisms"] = *authMechs
	}
	if isFlagSet(fs, "replSet") {
		parsed["replication.replSet"] = *replSet
	}
	if *histHours <= 0 || *histHours > 24*365*10 {
		fmt.Fprintln(stderr, "mayfly: --change-history-hours must be positive (at most ten years)")
		return exitBadOptions
	}
	if *advertise != "" && *replSet == "" {
		fmt.Fprintln(stderr, "mayfly: --advertise-host needs --replSet")
		return exitBadOptions
	}
	if *advertise != "" {
		if _, _, err := net.SplitHostPort(*advertise); err != nil {
			fmt.Fprintf(stderr, "mayfly: invalid --advertise-host %q: want host:port\n", *advertise)
			return exitBadOptions
		}
	}
	// Signals are caught before startup so that one arriving while the
	// store opens still ends in a clean shutdown, not a kill.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(server.Config{
		MinFreeDisk: *minFree, BallastSize: ballastSize,
		Bind: *bind, Port: *port, DBPath: *dbpath, Logger: log, Verbosity: verb, ReaperRate: *reaperRate, MaxConns: *maxConns,
		Argv: args, Parsed: parsed, ShutdownTimeout: shutdownTimeout,
		JournalCommitInterval: time.Duration(*commitMS) * time.Millisecond,
		TLS:                   *tlsOpts,
		MetricsListen:         *metrics,
		CacheSize:             int64(*cacheMB) << 20,
		LogRotate:             logFile.rotateFunc(log),
		Setup:                 cf.setup,
		Auth:                  *auth,
		AuthMechanisms:        mechs,
		InitRootUser:          rootUser,
		InitRootPassword:      rootPwd,
		ReplSetName:           *replSet,
		ChangeHistory:         time.Duration(*histHours * float64(time.Hour)),
		AdvertiseHost:         *advertise,

		NetworkMessageCompressors: *netComp,
	})
	if err != nil {
		log.Error("startup failed", zap.Error(err))
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		switch {
		case errors.Is(err, server.ErrAddrInUse):
			return exitAddrInUse
		case errors.Is(err, pebblekv.ErrLocked):
			return exitDBPathLock
		}
		return exitFailure
	}

	<-ctx.Done()
	stop() // a second signal now kills the process the default way
	log.Info("signal received; shutting down", zap.Duration("maxWait", shutdownTimeout))
	if err := srv.Close(); err != nil {
		log.Error("shutdown failed", zap.Error(err))
		return exitFailure
	}
	return exitOK
}

// maxCacheSizeMB is mongod's largest cacheSizeGB (10000 GB), in MiB.
const maxCacheSizeMB = 10000 << 10

// isFlagSet reports whether the command line set the flag.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// newLogger builds the zap logger writing to w (stderr). level is the
// lowest severity written (debug and info both write what verb lets
// through: debug lines D1…D5 only at their component's verbosity).
func newLogger(level, format string, w io.Writer, verb *mlog.Verbosity) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil || lvl < zapcore.DebugLevel || lvl > zapcore.ErrorLevel {
		return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "t"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = mlog.NewEncoder() // mongod's structured shape: t, s, c, id, ctx, msg, attr
	case "console":
		ec.EncodeLevel = mlog.LevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("invalid --log-format %q: want json or console", format)
	}
	floor := lvl
	if floor <= zapcore.InfoLevel {
		floor = mlog.Debug(mlog.MaxVerbosity) // the verbosity decides below info
	}
	core := verb.Core(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), floor))
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w)))), nil
}

// verbosityFlags are mongod's -v, -vv … -vvvvv: the global log
// verbosity 1 to 5 (debug lines D1…D5). The most v's given win.
type verbosityFlags []*bool

func (v verbosityFlags) level() int {
	n := 0
	for i, b := range v {
		if *b {
			n = i + 1
		}
	}
	return n
}

func newVerbosityFlags(fs *flag.FlagSet) verbosityFlags {
	var v verbosityFlags
	for i := 1; i <= mlog.MaxVerbosity; i++ {
		name := strings.Repeat("v", i)
		v = append(v, fs.Bool(name, false, fmt.Sprintf("log verbosity %d (mongod's -%s): debug lines up to D%d", i, name, i)))
	}
	return v
}
