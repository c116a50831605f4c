package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/mayflydb/mayfly/internal/mlog"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mayflydb/mayfly/engine"
)

// configFile is --config / -f FILE: a configuration file in mongod's YAML
// format. Most keys stand for a command-line flag and are applied by
// setting that flag, unless the command line set it (flags override the
// file); the rest (systemLog, operationProfiling, setParameter…) are kept
// here and applied by main. docs/mayfly.conf.example.yaml lists the keys.
type configFile struct {
	path string

	// applied are the file's keys in effect (not overridden by a flag),
	// with their values, for getCmdLineOpts' parsed.
	applied []configValue
	// setParams are setParameter's names and values (as text, as mongod
	// keeps them) in file order.
	setParams [][2]string

	// systemLog.verbosity (0-5): -v… and --log-level on the command
	// line override it.
	verbositySet bool
	verbosity    int

	logDest, logPath string
	logAppend        bool
	logFile          *mlog.File // rotatable (logfile.go)

	// operationProfiling: profileSet says a key was given.
	profileSet   bool
	profileLevel int32
	slowMS       int32   // -1: default
	sampleRate   float64 // -1: default
}

type configValue struct {
	key string
	val any
}

// valueKind is the YAML type a key takes.
type valueKind int

const (
	kindString valueKind = iota
	kindInt
	kindBool
	kindFloat
)

// configKey is one key the file may hold.
type configKey struct {
	key  string
	kind valueKind
	// flags are the flag the key sets (the first) and its other spellings:
	// any of them on the command line overrides the file.
	flags []string
	// conv turns the file's value (as text) into the flag's; "" sets
	// nothing.
	conv func(string) (string, error)
	// absent is the message when the flag does not exist in this build
	// (default: "not supported by this mayfly yet").
	absent string
	// set applies a key that is no flag (flags, if any, are then only
	// the command-line options that override it).
	set func(c *configFile, v string) error
}

// configKeys are the keys mayfly understands. A key for a new flag is one
// line: {key: "section.name", kind: …, flags: []string{"flag-name"}}.
// Keys whose flag is missing from this build are refused at startup.
var configKeys = []configKey{
	{key: "net.port", kind: kindInt, flags: []string{"port"}},
	{key: "net.bindIp", kind: kindString, flags: []string{"bind", "bind_ip"}},
	{key: "net.maxIncomingConnections", kind: kindInt, flags: []string{"maxConns"}},
	{key: "net.compression.compressors", kind: kindString, flags: []string{"networkMessageCompressors"}},
	{key: "net.tls.mode", kind: kindString, flags: []string{"tlsMode"}},
	{key: "net.tls.certificateKeyFile", kind: kindString, flags: []string{"tlsCertificateKeyFile"}},
	{key: "net.tls.CAFile", kind: kindString, flags: []string{"tlsCAFile"}},
	{key: "net.tls.allowInvalidCertificates", kind: kindBool, flags: []string{"tlsAllowInvalidCertificates"}},
	{key: "net.tls.allowConnectionsWithoutCertificates", kind: kindBool, flags: []string{"tlsAllowConnectionsWithoutCertificates"}},
	{key: "storage.dbPath", kind: kindString, flags: []string{"dbpath"}},
	{key: "storage.journal.commitIntervalMs", kind: kindInt, flags: []string{"journalCommitInterval"}},
	{key: "systemLog.verbosity", kind: kindInt, flags: []string{"log-level", "v", "vv", "vvv", "vvvv", "vvvvv"}, set: func(c *configFile, v string) error {
		n, _ := strconv.Atoi(v)
		if n < 0 || n > mlog.MaxVerbosity {
			return fmt.Errorf("systemLog.verbosity must be between 0 and 5, got %s", v)
		}
		c.verbositySet, c.verbosity = true, n
		return nil
	}},
	{key: "systemLog.destination", kind: kindString, set: func(c *configFile, v string) error { c.logDest = v; return nil }},
	{key: "systemLog.path", kind: kindString, set: func(c *configFile, v string) error { c.logPath = v; return nil }},
	{key: "systemLog.logAppend", kind: kindBool, set: func(c *configFile, v string) error { c.logAppend = v == "true"; return nil }},
	{key: "security.authorization", kind: kindString, flags: []string{"auth"}, conv: authorization,
		absent: "security.authorization: enabled is not supported yet: this mayfly has no authentication (--auth)"},
	{key: "replication.replSetName", kind: kindString, flags: []string{"replSet"}},
	{key: "replication.changeHistoryHours", kind: kindFloat, flags: []string{"change-history-hours"}},
	{key: "operationProfiling.mode", kind: kindString, set: profileMode},
	{key: "operationProfiling.slowOpThresholdMs", kind: kindInt, set: func(c *configFile, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("operationProfiling.slowOpThresholdMs: %q is out of range", v)
		}
		c.profileSet, c.slowMS = true, int32(n)
		return nil
	}},
	{key: "operationProfiling.slowOpSampleRate", kind: kindFloat, set: func(c *configFile, v string) error {
		f, _ := strconv.ParseFloat(v, 64)
		if !(f >= 0 && f <= 1) {
			return fmt.Errorf("operationProfiling.slowOpSampleRate must be between 0.0 and 1.0, got %s", v)
		}
		c.profileSet, c.sampleRate = true, f
		return nil
	}},
	// Server parameters that mayfly takes as a flag rather than in the engine.
	{key: "setParameter.authenticationMechanisms", kind: kindString, flags: []string{"authenticationMechanisms"}},
	// mayfly's own settings.
	{key: "mayfly.reaperRate", kind: kindInt, flags: []string{"reaper-rate"}},
	{key: "mayfly.metricsListen", kind: kindString, flags: []string{"metrics-listen"}},
	{key: "mayfly.minFreeDisk", kind: kindString, flags: []string{"min-free-disk"}},
	{key: "mayfly.ballastSize", kind: kindString, flags: []string{"ballast-size"}},
	{key: "mayfly.cacheSizeMB", kind: kindInt, flags: []string{"cacheSizeMB"}},
	{key: "mayfly.storage", kind: kindString, flags: []string{"storage"}},
	// mongod's WiredTiger cache size sets Pebble's block cache: a mongod
	// configuration carries over.
	{key: "storage.wiredTiger.engineConfig.cacheSizeGB", kind: kindFloat, flags: []string{"cacheSizeMB"}, conv: cacheSizeGB},
	{key: "mayfly.advertiseHost", kind: kindString, flags: []string{"advertise-host"}},
}

// cacheSizeGB maps storage.wiredTiger.engineConfig.cacheSizeGB (mongod's
// range, 0.25 to 10000) to --cacheSizeMB.
func cacheSizeGB(v string) (string, error) {
	f, _ := strconv.ParseFloat(v, 64)
	if !(f >= 0.25 && f <= 10000) {
		return "", fmt.Errorf("Bad value for storage.wiredTiger.engineConfig.cacheSizeGB: %s is not between 0.25 and 10000", v)
	}
	return strconv.Itoa(int(math.Round(f * 1024))), nil
}

// authorization maps security.authorization to --auth.
func authorization(v string) (string, error) {
	switch v {
	case "enabled":
		return "true", nil
	case "disabled":
		return "", nil // the default: nothing to set
	}
	return "", fmt.Errorf("security.authorization must be enabled or disabled, got %q", v)
}

func profileMode(c *configFile, v string) error {
	levels := map[string]int32{"off": 0, "slowOp": 1, "all": 2}
	l, ok := levels[v]
	if !ok {
		return fmt.Errorf("operationProfiling.mode must be off, slowOp or all, got %q", v)
	}
	c.profileSet, c.profileLevel = true, l
	return nil
}

// configFlags declares --config and -f on fs.
func configFlags(fs *flag.FlagSet) *configFile {
	c := &configFile{slowMS: -1, sampleRate: -1}
	fs.StringVar(&c.path, "config", "", "configuration file in mongod's YAML format (see docs/mayfly.conf.example.yaml); flags override it")
	fs.StringVar(&c.path, "f", "", "same as --config")
	return c
}

// configHook, set by tests, sees the flags and the file once loaded; when
// it returns true load stops the run (exit 0) before anything starts.
var configHook func(fs *flag.FlagSet, c *configFile) bool

// load reads the file, if one was given, into fs and c. It returns -1 to
// go on, or the exit code after printing why to stderr (2 for a bad file,
// as mongod's bad options).
func (c *configFile) load(fs *flag.FlagSet, stderr io.Writer) int {
	if c.path == "" {
		return -1
	}
	if err := c.apply(fs); err != nil {
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		return exitBadOptions
	}
	if err := c.openLog(); err != nil {
		fmt.Fprintf(stderr, "mayfly: %v\n", err)
		return exitFailure
	}
	if configHook != nil && configHook(fs, c) {
		return exitOK
	}
	return -1
}

// leaf is one key: value of the file.
type leaf struct {
	key  string
	node *yaml.Node
}

// apply parses the file and applies its keys.
func (c *configFile) apply(fs *flag.FlagSet) error {
	data, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("cannot read the configuration file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("Error parsing YAML config file %s: %v", c.path, err)
	}
	var leaves []leaf
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode && !isNull(root) {
			return fmt.Errorf("Error parsing YAML config file %s: the file must be a mapping of options", c.path)
		}
		if err := flatten(root, "", &leaves); err != nil {
			return err
		}
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	byKey := map[string]*configKey{}
	for i := range configKeys {
		byKey[configKeys[i].key] = &configKeys[i]
	}
	seen := map[string]bool{}
	for _, l := range leaves {
		seen[l.key] = true
	}
	if seen["mayfly.cacheSizeMB"] && seen["storage.wiredTiger.engineConfig.cacheSizeGB"] {
		return errors.New("mayfly.cacheSizeMB and storage.wiredTiger.engineConfig.cacheSizeGB both set the cache size: give one")
	}
	seen = map[string]bool{}
	for _, l := range leaves {
		if seen[l.key] {
			return fmt.Errorf("Error parsing YAML config file %s: option %s given twice", c.path, l.key)
		}
		seen[l.key] = true
		if name, ok := strings.CutPrefix(l.key, "setParameter."); ok && byKey[l.key] == nil {
			if l.node.Kind != yaml.ScalarNode || isNull(l.node) {
				return errors.New("Option: setParameter has a map with non scalar values, which is not allowed")
			}
			if err := engine.CheckParameterAtStartup(name, l.node.Value); err != nil {
				return err
			}
			c.setParams = append(c.setParams, [2]string{name, l.node.Value})
			c.applied = append(c.applied, configValue{l.key, l.node.Value})
			continue
		}
		k := byKey[l.key]
		if k == nil {
			return fmt.Errorf("Unrecognized option: %s", l.key)
		}
		text, val, err := scalarOf(l.key, k.kind, l.node)
		if err != nil {
			return err
		}
		overridden := false
		for _, f := range k.flags {
			overridden = overridden || onCommandLine[f]
		}
		if k.set != nil {
			if err := k.set(c, text); err != nil {
				return err
			}
			if !overridden {
				c.applied = append(c.applied, configValue{l.key, val})
			}
			continue
		}
		if overridden {
			continue
		}
		if k.conv != nil {
			if text, err = k.conv(text); err != nil {
				return err
			}
			if text == "" {
				c.applied = append(c.applied, configValue{l.key, val})
				continue
			}
		}
		if fs.Lookup(k.flags[0]) == nil {
			if k.absent != "" {
				return errors.New(k.absent)
			}
			return fmt.Errorf("%s is not supported by this mayfly yet (it has no --%s)", l.key, k.flags[0])
		}
		if err := fs.Set(k.flags[0], text); err != nil {
			return fmt.Errorf("Bad value for option %s: %v", l.key, err)
		}
		c.applied = append(c.applied, configValue{l.key, val})
	}
	return c.checkLog()
}

// flatten collects the file's options with their dotted names. Sections
// are mappings; setParameter's entries are kept whole.
func flatten(n *yaml.Node, prefix string, out *[]leaf) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			return fmt.Errorf("Error parsing YAML config file: option names must be strings (line %d)", kn.Line)
		}
		key := kn.Value
		if prefix != "" {
			key = prefix + "." + key
		}
		switch {
		case key == "setParameter":
			if isNull(vn) {
				continue
			}
			if vn.Kind != yaml.MappingNode {
				return errors.New("Option: setParameter is of type StringMap, but value in YAML config is not a map type")
			}
			for j := 0; j+1 < len(vn.Content); j += 2 {
				*out = append(*out, leaf{"setParameter." + vn.Content[j].Value, vn.Content[j+1]})
			}
		case vn.Kind == yaml.MappingNode && !isLeafKey(key):
			if err := flatten(vn, key, out); err != nil {
				return err
			}
		case isNull(vn) && !isLeafKey(key):
			// an empty section
		default:
			*out = append(*out, leaf{key, vn})
		}
	}
	return nil
}

func isLeafKey(key string) bool {
	for _, k := range configKeys {
		if k.key == key {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// scalarOf checks the value of key against its kind and returns it as
// flag text and as the typed value getCmdLineOpts shows.
func scalarOf(key string, kind valueKind, n *yaml.Node) (string, any, error) {
	// mongod's wording (options_parser.cpp, YAMLNodeToValue).
	types := map[valueKind]string{kindString: "string", kindInt: "int", kindBool: "bool", kindFloat: "double"}
	bad := func() (string, any, error) {
		got := strconv.Quote(n.Value)
		switch {
		case n.Kind == yaml.MappingNode:
			got = "a mapping"
		case n.Kind == yaml.SequenceNode:
			got = "a list"
		case isNull(n):
			got = "nothing"
		case kind == kindBool:
			return "", nil, fmt.Errorf("Expected boolean but found string: %s for option: %s", n.Value, key)
		}
		return "", nil, fmt.Errorf("Error parsing option %q as %s in config file: found %s", key, types[kind], got)
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return bad()
	}
	switch kind {
	case kindInt:
		var i int64
		if n.Tag != "!!int" || n.Decode(&i) != nil {
			return bad()
		}
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return strconv.FormatInt(i, 10), int32(i), nil
		}
		return strconv.FormatInt(i, 10), i, nil
	case kindBool:
		var b bool
		if n.Tag != "!!bool" || n.Decode(&b) != nil {
			return bad()
		}
		return strconv.FormatBool(b), b, nil
	case kindFloat:
		var f float64
		if (n.Tag != "!!float" && n.Tag != "!!int") || n.Decode(&f) != nil {
			return bad()
		}
		return strconv.FormatFloat(f, 'g', -1, 64), f, nil
	}
	if n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool" {
		return bad() // a string option takes any scalar as its text: "mode: off" is "off"
	}
	return n.Value, n.Value, nil
}

// checkLog validates systemLog's destination and path as mongod does.
func (c *configFile) checkLog() error {
	switch c.logDest {
	case "":
		if c.logPath != "" {
			return errors.New(`systemLog.path requires systemLog.destination to be set to "file"`)
		}
	case "file":
		if c.logPath == "" {
			return errors.New("systemLog.path is required if systemLog.destination is to a file")
		}
	case "syslog":
		return errors.New("systemLog.destination: syslog is not supported: mayfly logs to stderr or to a file")
	default:
		return fmt.Errorf("Bad value for systemLog.destination: %s", c.logDest)
	}
	return nil
}

// openLog opens systemLog.path. Without logAppend an existing log is
// renamed aside first (path.<UTC time>), as mongod does at startup.
func (c *configFile) openLog() error {
	if c.logDest != "file" {
		return nil
	}
	f, err := mlog.OpenFile(c.logPath, c.logAppend, false) // renames an existing log aside without logAppend
	if err != nil {
		return err
	}
	c.logFile = f
	return nil
}

// logWriter is where logs go: systemLog.path, else stderr.
func (c *configFile) logWriter(stderr io.Writer) io.Writer {
	if c.logFile != nil {
		return c.logFile
	}
	return stderr
}

// addParsed adds the file's settings to getCmdLineOpts' parsed, with
// their dotted names, and the file's path as "config", as mongod shows
// them. Keys the command line overrode show the flag's value instead.
func (c *configFile) addParsed(parsed map[string]any) {
	if c.path == "" {
		return
	}
	parsed["config"] = c.path
	for _, v := range c.applied {
		parsed[v.key] = v.val
	}
}

// setup applies, once the engine is open, the settings that live in it:
// setParameter and operationProfiling.
func (c *configFile) setup(e *engine.Engine) error {
	for _, p := range c.setParams {
		if err := e.SetParameterAtStartup(p[0], p[1]); err != nil {
			return err
		}
	}
	if c.profileSet {
		return e.SetDefaultProfile(c.profileLevel, c.slowMS, c.sampleRate)
	}
	return nil
}
