package query

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// regexPred implements $regex and regex literals: it matches strings and
// symbols against the pattern, and regex values by equality of pattern and
// options (which is how mongod's RegexMatchExpression treats a stored regex).
type regexPred struct {
	re      *regexp.Regexp
	pattern string
	options string
}

func (p *regexPred) test(v any) bool {
	switch s := v.(type) {
	case string:
		return p.re.MatchString(s)
	case bson.Symbol:
		return p.re.MatchString(string(s))
	case bson.Regex:
		return s.Pattern == p.pattern && s.Options == p.options
	}
	return false
}

func newRegexPred(pattern, options string) (*regexPred, error) {
	re, err := CompileRegex(pattern, options)
	if err != nil {
		return nil, err
	}
	return &regexPred{re: re, pattern: pattern, options: options}, nil
}

// CompileRegex translates a MongoDB (PCRE) regular expression with its
// options into a Go regexp. MongoDB options i, m, s map to RE2 flags; x
// (extended) is applied here by dropping unescaped whitespace and #-comments
// outside character classes, since RE2 has no such mode; u is accepted and
// ignored (Go regexps are always UTF-8 aware). PCRE features RE2 cannot
// express (back-references, look-around, possessive quantifiers) are refused
// with mongod's "Regular expression is invalid" error (code 51091) rather
// than silently matching differently.
func CompileRegex(pattern, options string) (*regexp.Regexp, error) {
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Regular expression cannot contain an embedded null byte")
	}
	var flags []byte
	extended := false
	for i := 0; i < len(options); i++ {
		switch c := options[i]; c {
		case 'i', 'm', 's':
			if !containsByte(flags, c) {
				flags = append(flags, c)
			}
		case 'x':
			extended = true
		case 'u', 'l':
		default:
			return nil, mongoerr.New(51108, "invalid flag in regex options: %c", c)
		}
	}
	src := translatePCRE(pattern, extended, !containsByte(flags, 'm') && !inlineMultiline.MatchString(pattern))
	if len(flags) > 0 {
		src = "(?" + string(flags) + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		msg := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			msg = string(se.Code)
		}
		return nil, mongoerr.New(51091, "Regular expression is invalid: %s", msg)
	}
	return re, nil
}

// inlineMultiline spots a (?m) style flag group inside a pattern, which
// makes $ mean end of line.
var inlineMultiline = regexp.MustCompile(`\(\?[a-zA-Z]*m`)

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// translatePCRE rewrites the few PCRE spellings RE2 lacks but can express:
// \Z and, outside multiline mode, $ (both: end of subject or before a final
// newline; only whether a match exists matters here, so consuming that
// newline is harmless) and \h (horizontal space), and applies extended
// mode. Everything else is passed through for RE2 to accept or reject.
func translatePCRE(p string, extended, dollarEnd bool) string {
	if !extended && !strings.Contains(p, `\Z`) && !strings.Contains(p, `\h`) &&
		!(dollarEnd && strings.Contains(p, "$")) {
		return p
	}
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			n := p[i+1]
			i++
			switch {
			case n == 'Z' && !inClass:
				b.WriteString(`(?:\n?\z)`)
			case n == 'h':
				if inClass {
					b.WriteString(` \t`)
				} else {
					b.WriteString(`[ \t]`)
				}
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			continue
		}
		if inClass {
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
			continue
		}
		if c == '[' {
			inClass = true
			b.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal member.
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
			continue
		}
		if c == '$' && dollarEnd {
			b.WriteString(`(?:\n?\z)`)
			continue
		}
		if extended {
			switch c {
			case ' ', '\t', '\n', '\r', '\f', '\v':
				continue
			case '#':
				for i < len(p) && p[i] != '\n' {
					i++
				}
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}
