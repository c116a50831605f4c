package expr

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// FormatDouble renders a double as mongod does in string conversions.
func FormatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == 0 && math.Signbit(f) {
		return "-0"
	}
	// Shortest round-trip digits; exponent form when the decimal exponent
	// is outside [-4, 16), like fmt's "{}" that mongod uses.
	es := strconv.FormatFloat(f, 'e', -1, 64)
	_, exp, _ := strings.Cut(es, "e")
	if e, _ := strconv.Atoi(exp); f != 0 && (e < -4 || e >= 16) {
		return es
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// coerceToString converts a value to a string as mongod's
// Value::coerceToString does for $substr, $toLower, $strcasecmp...
func coerceToString(op string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bson.Symbol:
		return string(x), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return FormatDouble(x), nil
	case bson.Decimal128:
		return x.String(), nil
	case bson.DateTime:
		return formatDate("%Y-%m-%dT%H:%M:%S.%LZ", x, utcZone)
	case bson.Timestamp:
		return "Timestamp(" + strconv.FormatUint(uint64(x.T), 10) + ", " + strconv.FormatUint(uint64(x.I), 10) + ")", nil
	case bson.JavaScript:
		return string(x), nil
	}
	if IsNullish(v) {
		return "", nil
	}
	return "", mongoerr.New(16007, "can't convert from BSON type %s to String", bsonx.TypeName(v))
}

func strArg(op string, v any, code int32, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", mongoerr.New(code, "%s requires %s to be a string, found: %s", op, what, bsonx.TypeName(v))
	}
	return s, nil
}

// intArg extracts an integral argument (any numeric type holding an integer).
func intArg(v any) (int64, bool) {
	if !bsonx.IsNumber(v) {
		return 0, false
	}
	return bsonx.ToInt64(v)
}

// defaultTrimChars are the characters $trim removes by default: the ASCII
// whitespace and NUL plus the Unicode space characters mongod lists.
var defaultTrimChars = []rune{0, ' ', '\t', '\n', '\v', '\f', '\r', 0xa0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000}

type trimExpr struct {
	name        string
	input, char Expr
	left, right bool
}

func (t *trimExpr) Eval(env *Env) (any, error) {
	in, err := t.input.Eval(env)
	if err != nil {
		return nil, err
	}
	if IsNullish(in) {
		return nil, nil
	}
	s, ok := in.(string)
	if !ok {
		return nil, mongoerr.New(50699, "%s requires its input to be a string, got %s (of type %s) instead.", t.name, ExtJSON(in), bsonx.TypeName(in))
	}
	chars := defaultTrimChars
	if t.char != nil {
		c, err := t.char.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(c) {
			return nil, nil
		}
		cs, ok := c.(string)
		if !ok {
			return nil, mongoerr.New(50700, "%s requires 'chars' to be a string, got %s (of type %s) instead.", t.name, ExtJSON(c), bsonx.TypeName(c))
		}
		chars = []rune(cs)
	}
	in2 := func(r rune) bool {
		for _, c := range chars {
			if c == r {
				return true
			}
		}
		return false
	}
	if t.left {
		s = strings.TrimLeftFunc(s, in2)
	}
	if t.right {
		s = strings.TrimRightFunc(s, in2)
	}
	return s, nil
}

type regexExpr struct {
	name               string
	input, regex, opts Expr
	cached             *regexp.Regexp
}

func compileRegexOp(name string, args any, s *scope) (Expr, error) {
	m, err := objectArgs(name, args, 51103, "input", "regex", "options")
	if err != nil {
		return nil, err
	}
	r := &regexExpr{name: name}
	if _, ok := m["input"]; !ok {
		return nil, mongoerr.New(31022, "%s requires 'input' parameter", name)
	}
	if _, ok := m["regex"]; !ok {
		return nil, mongoerr.New(31023, "%s requires 'regex' parameter", name)
	}
	if r.input, err = compileOpt(m, "input", s); err != nil {
		return nil, err
	}
	if r.regex, err = compileOpt(m, "regex", s); err != nil {
		return nil, err
	}
	if r.opts, err = compileOpt(m, "options", s); err != nil {
		return nil, err
	}
	// Precompile constant patterns once.
	if pv, ok := Constant(r.regex); ok {
		var ov any = bsonx.Missing
		if r.opts != nil {
			if c, ok := Constant(r.opts); ok {
				ov = c
			} else {
				return r, nil
			}
		}
		re, err := r.build(pv, ov)
		if err != nil {
			return nil, err
		}
		r.cached = re
	}
	return r, nil
}

// build compiles a pattern with options into a Go regexp. Go's RE2 syntax
// differs from PCRE in a few constructs (backreferences, lookaround), which
// then fail with 51111 like an invalid pattern.
func (r *regexExpr) build(pv, ov any) (*regexp.Regexp, error) {
	var pat, flags string
	switch p := pv.(type) {
	case string:
		pat = p
	case bson.Regex:
		pat, flags = p.Pattern, p.Options
	default:
		if IsNullish(pv) {
			return nil, nil
		}
		return nil, mongoerr.New(51105, "%s needs 'regex' to be of type string or regex", r.name)
	}
	if !IsNullish(ov) {
		os, ok := ov.(string)
		if !ok {
			return nil, mongoerr.New(51106, "%s needs 'options' to be of type string", r.name)
		}
		if flags != "" && os != "" {
			return nil, mongoerr.New(51107, "%s found regex option(s) specified in both 'regex' and 'option' fields", r.name)
		}
		if os != "" {
			flags = os
		}
	}
	if strings.ContainsRune(pat, 0) {
		return nil, mongoerr.New(51109, "%s: regular expression cannot contain an embedded null byte", r.name)
	}
	goFlags := ""
	for _, f := range flags {
		switch f {
		case 'i':
			goFlags += "i"
		case 'm':
			goFlags += "m"
		case 's':
			goFlags += "s"
		case 'x':
			pat = stripExtended(pat)
		case 'u':
		default:
			return nil, mongoerr.New(51108, "%s invalid flag in regex options: %c", r.name, f)
		}
	}
	if goFlags != "" {
		pat = "(?" + goFlags + ")" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, mongoerr.New(51111, "Invalid Regex in %s: %s", r.name, err.Error())
	}
	return re, nil
}

// stripExtended removes whitespace and #-comments for the 'x' flag.
func stripExtended(p string) string {
	var b strings.Builder
	inClass, esc := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case !inClass && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'):
			continue
		case !inClass && c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func (r *regexExpr) Eval(env *Env) (any, error) {
	in, err := r.input.Eval(env)
	if err != nil {
		return nil, err
	}
	re := r.cached
	if re == nil {
		pv, err := r.regex.Eval(env)
		if err != nil {
			return nil, err
		}
		ov, err := evalOpt(r.opts, env)
		if err != nil {
			return nil, err
		}
		if re, err = r.build(pv, ov); err != nil {
			return nil, err
		}
	}
	empty := func() any {
		switch r.name {
		case "$regexMatch":
			return false
		case "$regexFindAll":
			return bson.A{}
		}
		return nil
	}
	if IsNullish(in) {
		return empty(), nil
	}
	s, ok := in.(string)
	if !ok {
		return nil, mongoerr.New(51104, "%s needs 'input' to be of type string", r.name)
	}
	if re == nil {
		return empty(), nil
	}
	switch r.name {
	case "$regexMatch":
		return re.MatchString(s), nil
	case "$regexFind":
		loc := re.FindStringSubmatchIndex(s)
		if loc == nil {
			return nil, nil
		}
		return matchDoc(s, loc), nil
	}
	out := bson.A{}
	for _, loc := range re.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, matchDoc(s, loc))
	}
	return out, nil
}

func matchDoc(s string, loc []int) bson.D {
	caps := bson.A{}
	for i := 2; i+1 < len(loc); i += 2 {
		if loc[i] < 0 {
			caps = append(caps, nil)
		} else {
			caps = append(caps, s[loc[i]:loc[i+1]])
		}
	}
	return bson.D{
		{Key: "match", Value: s[loc[0]:loc[1]]},
		{Key: "idx", Value: int32(utf8.RuneCountInString(s[:loc[0]]))},
		{Key: "captures", Value: caps},
	}
}

type replaceExpr struct {
	name                     string
	input, find, replacement Expr
}

func (r *replaceExpr) Eval(env *Env) (any, error) {
	var vals [3]any
	null := false
	for i, e := range []Expr{r.input, r.find, r.replacement} {
		v, err := e.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			null = true
		} else if _, ok := v.(string); !ok {
			what := []string{"input", "find", "replacement"}[i]
			return nil, mongoerr.New(51746, "%s requires that '%s' be a string, found: %s", r.name, what, ExtJSON(v))
		}
		vals[i] = v
	}
	if null {
		return nil, nil
	}
	in, f, rep := vals[0].(string), vals[1].(string), vals[2].(string)
	if len(rep) > len(f) {
		// refuse before building a result over 16 MB (16493)
		n := 1
		if r.name == "$replaceAll" {
			n = strings.Count(in, f)
		}
		if int64(len(in))+int64(n)*int64(len(rep)-len(f)) > MaxStringBytes {
			return nil, StringTooLong()
		}
	}
	if err := env.poll(len(in) / 64); err != nil {
		return nil, err
	}
	if r.name == "$replaceOne" {
		return strings.Replace(in, f, rep, 1), nil
	}
	return strings.ReplaceAll(in, f, rep), nil
}

func init() {
	naryOp(0, -1, func(_ string, v []any) (any, error) {
		n := 0
		for _, x := range v {
			if IsNullish(x) {
				return nil, nil
			}
			s, ok := x.(string)
			if !ok {
				return nil, mongoerr.New(16702, "$concat only supports strings, not %s", bsonx.TypeName(x))
			}
			n += len(s)
		}
		if n > MaxStringBytes {
			return nil, StringTooLong() // before building it
		}
		var b strings.Builder
		b.Grow(n)
		for _, x := range v {
			b.WriteString(x.(string))
		}
		return b.String(), nil
	}, "$concat")
	naryOp(3, 3, func(name string, v []any) (any, error) {
		s, err := coerceToString(name, v[0])
		if err != nil {
			return nil, err
		}
		if !bsonx.IsNumber(v[1]) {
			return nil, mongoerr.New(16034, "%s:  starting index must be a numeric type (is BSON type %s)", name, bsonx.TypeName(v[1]))
		}
		if !bsonx.IsNumber(v[2]) {
			return nil, mongoerr.New(16035, "%s:  length must be a numeric type (is BSON type %s)", name, bsonx.TypeName(v[2]))
		}
		start := truncInt(v[1])
		length := truncInt(v[2])
		if start < 0 {
			return nil, mongoerr.New(50752, "%s:  starting index must be non-negative (got: %d)", name, start)
		}
		n := int64(len(s))
		if length < 0 || length > n {
			length = n
		}
		if start < n && !utf8.RuneStart(s[start]) {
			return nil, mongoerr.New(28656, "%s:  Invalid range, starting index is a UTF-8 continuation byte.", name)
		}
		if start+length < n && !utf8.RuneStart(s[start+length]) {
			return nil, mongoerr.New(28657, "%s:  Invalid range, ending index is in the middle of a UTF-8 character.", name)
		}
		if start >= n {
			return "", nil
		}
		return s[start:min(start+length, n)], nil
	}, "$substr", "$substrBytes")
	naryOp(3, 3, func(name string, v []any) (any, error) {
		s, err := coerceToString(name, v[0])
		if err != nil {
			return nil, err
		}
		if !bsonx.IsNumber(v[1]) {
			return nil, mongoerr.New(34450, "%s: starting index must be a numeric type (is BSON type %s)", name, bsonx.TypeName(v[1]))
		}
		start, ok := bsonx.ToInt64(v[1])
		if !ok {
			return nil, mongoerr.New(34451, "%s: starting index cannot be represented as a 32-bit integral value: %s", name, ExtJSON(v[1]))
		}
		if !bsonx.IsNumber(v[2]) {
			return nil, mongoerr.New(34452, "%s: length must be a numeric type (is BSON type %s)", name, bsonx.TypeName(v[2]))
		}
		length, ok := bsonx.ToInt64(v[2])
		if !ok {
			return nil, mongoerr.New(34453, "%s: length cannot be represented as a 32-bit integral value: %s", name, ExtJSON(v[2]))
		}
		if length < 0 {
			return nil, mongoerr.New(34454, "%s: length must be a nonnegative integer.", name)
		}
		if start < 0 {
			return nil, mongoerr.New(34455, "%s: the starting index must be nonnegative integer.", name)
		}
		r := []rune(s)
		if start >= int64(len(r)) {
			return "", nil
		}
		end := min(start+length, int64(len(r)))
		return string(r[start:end]), nil
	}, "$substrCP")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		s, err := coerceToString(name, v[0])
		if err != nil {
			return nil, err
		}
		if name == "$toLower" {
			return asciiMap(s, 'A', 'Z', 'a'-'A'), nil
		}
		return asciiMap(s, 'a', 'z', 'A'-'a'), nil
	}, "$toLower", "$toUpper")
	naryOp(1, 1, func(name string, v []any) (any, error) {
		s, ok := v[0].(string)
		if !ok {
			code := int32(34473)
			if name == "$strLenCP" {
				code = 34471
			}
			return nil, mongoerr.New(code, "%s requires a string argument, found: %s", name, typeNameMissing(v[0]))
		}
		if name == "$strLenCP" {
			return int32(utf8.RuneCountInString(s)), nil
		}
		return int32(len(s)), nil
	}, "$strLenBytes", "$strLenCP")
	naryOp(2, 2, func(name string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		s, ok := v[0].(string)
		if !ok {
			return nil, mongoerr.New(40085, "$split requires an expression that evaluates to a string as a first argument, found: %s", bsonx.TypeName(v[0]))
		}
		if IsNullish(v[1]) {
			return nil, nil
		}
		d, ok := v[1].(string)
		if !ok {
			return nil, mongoerr.New(40086, "$split requires an expression that evaluates to a string as a second argument, found: %s", bsonx.TypeName(v[1]))
		}
		if d == "" {
			return nil, mongoerr.New(40087, "$split requires a non-empty separator")
		}
		out := bson.A{}
		for _, p := range strings.Split(s, d) {
			out = append(out, p)
		}
		return out, nil
	}, "$split")
	for _, n := range []string{"$trim", "$ltrim", "$rtrim"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			m, err := objectArgs(name, args, 50696, "input", "chars")
			if err != nil {
				return nil, err
			}
			if _, ok := m["input"]; !ok {
				return nil, mongoerr.New(50695, "%s requires an 'input' field", name)
			}
			t := &trimExpr{name: name, left: name != "$rtrim", right: name != "$ltrim"}
			if t.input, err = compileOpt(m, "input", s); err != nil {
				return nil, err
			}
			if t.char, err = compileOpt(m, "chars", s); err != nil {
				return nil, err
			}
			return t, nil
		}, n)
	}
	naryOp(2, 4, func(name string, v []any) (any, error) {
		if IsNullish(v[0]) {
			return nil, nil
		}
		cp := name == "$indexOfCP"
		code1, code2 := int32(40091), int32(40092)
		if cp {
			code1, code2 = 40093, 40094
		}
		s, ok := v[0].(string)
		if !ok {
			return nil, mongoerr.New(code1, "%s requires a string as the first argument, found: %s", name, bsonx.TypeName(v[0]))
		}
		sub, ok := v[1].(string)
		if !ok {
			return nil, mongoerr.New(code2, "%s requires a string as the second argument, found: %s", name, bsonx.TypeName(v[1]))
		}
		idx := func(i int, what string) (int64, error) {
			x, ok := intArg(v[i])
			if !ok {
				return 0, mongoerr.New(40096, "%srequires an integral %s, found a value of type: %s, with value: %s", name, what, bsonx.TypeName(v[i]), ExtJSON(v[i]))
			}
			if x < 0 {
				return 0, mongoerr.New(40097, "%s requires a nonnegative %s, found: %d", name, what, x)
			}
			return x, nil
		}
		var runes []rune
		n := int64(len(s))
		if cp {
			runes = []rune(s)
			n = int64(len(runes))
		}
		start, end := int64(0), n
		var err error
		if len(v) > 2 {
			if start, err = idx(2, "starting index"); err != nil {
				return nil, err
			}
		}
		if len(v) > 3 {
			e, err := idx(3, "ending index")
			if err != nil {
				return nil, err
			}
			end = min(e, n)
		}
		if cp {
			// mongod tries each code point in [start, end) and matches the
			// token against the rest of the whole string.
			if end < start {
				return int32(-1), nil
			}
			if s == "" && sub == "" && start == 0 {
				return int32(0), nil
			}
			for i := start; i < end; i++ {
				if strings.HasPrefix(string(runes[i:]), sub) {
					return int32(i), nil
				}
			}
			return int32(-1), nil
		}
		if start > n || end < start {
			return int32(-1), nil
		}
		i := strings.Index(s[start:end], sub)
		if i < 0 {
			return int32(-1), nil
		}
		return int32(start + int64(i)), nil
	}, "$indexOfBytes", "$indexOfCP")
	naryOp(2, 2, func(name string, v []any) (any, error) {
		a, err := coerceToString(name, v[0])
		if err != nil {
			return nil, err
		}
		b, err := coerceToString(name, v[1])
		if err != nil {
			return nil, err
		}
		return int32(strings.Compare(asciiMap(a, 'a', 'z', 'A'-'a'), asciiMap(b, 'a', 'z', 'A'-'a'))), nil
	}, "$strcasecmp")
	register(compileRegexOp, "$regexMatch", "$regexFind", "$regexFindAll")
	for _, n := range []string{"$replaceOne", "$replaceAll"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			m, err := objectArgs(name, args, 51750, "input", "find", "replacement")
			if err != nil {
				return nil, err
			}
			r := &replaceExpr{name: name}
			for i, k := range []string{"input", "find", "replacement"} {
				if _, ok := m[k]; !ok {
					return nil, mongoerr.New(51749-int32(i), "%s requires '%s' to be specified", name, k)
				}
			}
			if r.input, err = compileOpt(m, "input", s); err != nil {
				return nil, err
			}
			if r.find, err = compileOpt(m, "find", s); err != nil {
				return nil, err
			}
			if r.replacement, err = compileOpt(m, "replacement", s); err != nil {
				return nil, err
			}
			return r, nil
		}, n)
	}
}

func typeNameMissing(v any) string {
	return bsonx.TypeName(v)
}

func truncInt(v any) int64 {
	if i, ok := bsonx.ToInt64(v); ok {
		return i
	}
	f := toF(v)
	if math.IsNaN(f) {
		return 0
	}
	return int64(math.Trunc(f))
}

// asciiMap shifts ASCII letters in [lo, hi] by delta (mongod's $toLower,
// $toUpper and $strcasecmp only fold ASCII).
func asciiMap(s string, lo, hi byte, delta int) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] >= lo && s[i] <= hi {
			if b == nil {
				b = []byte(s)
			}
			b[i] = byte(int(s[i]) + delta)
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}
