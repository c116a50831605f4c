package expr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // Olson names must resolve even on hosts without zoneinfo

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

var utcZone = time.UTC

// parseTimezone resolves an Olson name ("America/New_York"), "UTC"/"GMT" or
// a fixed offset ("+04:45", "+0445", "-03") to a location.
func parseTimezone(v any) (*time.Location, error) {
	s, ok := v.(string)
	if !ok {
		return nil, mongoerr.New(40517, "timezone must evaluate to a string, found %s", bsonx.TypeName(v))
	}
	if s == "UTC" || s == "GMT" || s == "Z" {
		return time.UTC, nil
	}
	if len(s) > 1 && (s[0] == '+' || s[0] == '-') {
		digits := strings.ReplaceAll(s[1:], ":", "")
		var h, m int
		var err1, err2 error
		switch len(digits) {
		case 2:
			h, err1 = strconv.Atoi(digits)
		case 4:
			h, err1 = strconv.Atoi(digits[:2])
			m, err2 = strconv.Atoi(digits[2:])
		default:
			err1 = fmt.Errorf("bad")
		}
		if err1 == nil && err2 == nil && h <= 99 && m < 60 {
			off := h*3600 + m*60
			if s[0] == '-' {
				off = -off
			}
			return time.FixedZone(s, off), nil
		}
	} else if loc, err := time.LoadLocation(s); err == nil && s != "" && s != "Local" {
		return loc, nil
	}
	return nil, mongoerr.New(40485, "unrecognized time zone identifier: \"%s\"", s)
}

// toDateTime converts a date-like value (date, timestamp, ObjectId).
func toDateTime(v any) (bson.DateTime, bool) {
	switch d := v.(type) {
	case bson.DateTime:
		return d, true
	case bson.Timestamp:
		return bson.DateTime(int64(d.T) * 1000), true
	case bson.ObjectID:
		return bson.NewDateTimeFromTime(d.Timestamp()), true
	}
	return 0, false
}

func goTime(d bson.DateTime, loc *time.Location) time.Time {
	return time.UnixMilli(int64(d)).In(loc)
}

func fromTime(t time.Time) bson.DateTime { return bson.DateTime(t.UnixMilli()) }

// dateArgs is the common {date, timezone} argument of the extraction
// operators, which also accept a bare date expression.
type dateArgs struct {
	date, tz Expr
}

func compileDateArgs(name string, args any, s *scope) (dateArgs, error) {
	if d, ok := args.(bson.D); ok && len(d) > 0 && !strings.HasPrefix(d[0].Key, "$") {
		m, err := objectArgs(name, args, 40535, "date", "timezone")
		if err != nil {
			return dateArgs{}, mongoerr.New(40535, "unrecognized option to %s: \"%s\"", name, firstUnknown(d, "date", "timezone"))
		}
		if _, ok := m["date"]; !ok {
			return dateArgs{}, mongoerr.New(40539, "missing 'date' argument to %s, provided: %s", name, ExtJSON(d))
		}
		var da dateArgs
		if da.date, err = compileOpt(m, "date", s); err != nil {
			return da, err
		}
		da.tz, err = compileOpt(m, "timezone", s)
		return da, err
	}
	if a, ok := args.(bson.A); ok {
		if len(a) != 1 {
			return dateArgs{}, mongoerr.New(40536, "%s accepts exactly one argument if given an array, but was given %d", name, len(a))
		}
		args = a[0]
	}
	e, err := compile(args, s)
	return dateArgs{date: e}, err
}

func firstUnknown(d bson.D, allowed ...string) string {
	for _, e := range d {
		ok := false
		for _, a := range allowed {
			ok = ok || a == e.Key
		}
		if !ok {
			return e.Key
		}
	}
	return ""
}

// evalTZ evaluates an optional timezone (nil result = null → null output).
func evalTZ(e Expr, env *Env) (*time.Location, bool, error) {
	if e == nil {
		return time.UTC, true, nil
	}
	v, err := e.Eval(env)
	if err != nil {
		return nil, false, err
	}
	if IsNullish(v) {
		return nil, false, nil
	}
	loc, err := parseTimezone(v)
	return loc, err == nil, err
}

// evalDate evaluates a date argument; ok=false means null result.
func evalDate(e Expr, env *Env, code int32) (bson.DateTime, bool, error) {
	v, err := e.Eval(env)
	if err != nil {
		return 0, false, err
	}
	if IsNullish(v) {
		return 0, false, nil
	}
	d, ok := toDateTime(v)
	if !ok {
		return 0, false, mongoerr.New(code, "can't convert from BSON type %s to Date", bsonx.TypeName(v))
	}
	return d, true, nil
}

type datePart struct {
	dateArgs
	fn func(t time.Time) any
}

func (p *datePart) Eval(env *Env) (any, error) {
	d, ok, err := evalDate(p.date, env, 16006)
	if err != nil || !ok {
		return nil, err
	}
	loc, ok, err := evalTZ(p.tz, env)
	if err != nil || !ok {
		return nil, err
	}
	return p.fn(goTime(d, loc)), nil
}

func sundayWeek(t time.Time) int32 {
	return int32((t.YearDay() - 1 + 7 - int(t.Weekday())) / 7)
}

func isoDOW(t time.Time) int32 {
	w := int32(t.Weekday())
	if w == 0 {
		return 7
	}
	return w
}

var dateParts = map[string]func(time.Time) any{
	"$year":         func(t time.Time) any { return int32(t.Year()) },
	"$month":        func(t time.Time) any { return int32(t.Month()) },
	"$dayOfMonth":   func(t time.Time) any { return int32(t.Day()) },
	"$hour":         func(t time.Time) any { return int32(t.Hour()) },
	"$minute":       func(t time.Time) any { return int32(t.Minute()) },
	"$second":       func(t time.Time) any { return int32(t.Second()) },
	"$millisecond":  func(t time.Time) any { return int32(t.Nanosecond() / 1e6) },
	"$dayOfWeek":    func(t time.Time) any { return int32(t.Weekday()) + 1 },
	"$dayOfYear":    func(t time.Time) any { return int32(t.YearDay()) },
	"$week":         func(t time.Time) any { return sundayWeek(t) },
	"$isoWeek":      func(t time.Time) any { _, w := t.ISOWeek(); return int32(w) },
	"$isoWeekYear":  func(t time.Time) any { y, _ := t.ISOWeek(); return int64(y) },
	"$isoDayOfWeek": func(t time.Time) any { return isoDOW(t) },
}

var monthNames = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}

// formatDate implements $dateToString's format specifiers.
func formatDate(format string, d bson.DateTime, loc *time.Location) (string, error) {
	t := goTime(d, loc)
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(format) {
			return "", mongoerr.New(18535, "Unmatched '%%' at end of format string")
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'G':
			y, _ := t.ISOWeek()
			fmt.Fprintf(&b, "%04d", y)
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'L':
			fmt.Fprintf(&b, "%03d", t.Nanosecond()/1e6)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'u':
			fmt.Fprintf(&b, "%d", isoDOW(t))
		case 'U':
			fmt.Fprintf(&b, "%02d", sundayWeek(t))
		case 'V':
			_, w := t.ISOWeek()
			fmt.Fprintf(&b, "%02d", w)
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday())+1)
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			fmt.Fprintf(&b, "%c%02d%02d", sign, off/3600, off%3600/60)
		case 'Z':
			_, off := t.Zone()
			fmt.Fprintf(&b, "%d", off/60)
		case 'b':
			b.WriteString(monthNames[t.Month()-1][:3])
		case 'B':
			b.WriteString(monthNames[t.Month()-1])
		case '%':
			b.WriteByte('%')
		default:
			return "", mongoerr.New(18536, "Invalid format character '%%%c' in format string", format[i])
		}
	}
	return b.String(), nil
}

type dateToString struct {
	date, format, tz, onNull Expr
}

func (e *dateToString) Eval(env *Env) (any, error) {
	format := "%Y-%m-%dT%H:%M:%S.%LZ"
	if e.format != nil {
		f, err := e.format.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(f) {
			return nil, nil
		}
		fs, ok := f.(string)
		if !ok {
			return nil, mongoerr.New(18533, "$dateToString requires that 'format' be a string, found: %s with value %s", bsonx.TypeName(f), ExtJSON(f))
		}
		format = fs
	}
	loc, ok, err := evalTZ(e.tz, env)
	if err != nil || !ok {
		return nil, err
	}
	if e.format == nil && e.tz != nil && loc != time.UTC {
		format = "%Y-%m-%dT%H:%M:%S.%L"
	}
	v, err := e.date.Eval(env)
	if err != nil {
		return nil, err
	}
	if IsNullish(v) {
		if e.onNull != nil {
			return e.onNull.Eval(env)
		}
		return nil, nil
	}
	d, ok := toDateTime(v)
	if !ok {
		return nil, mongoerr.New(16006, "can't convert from BSON type %s to Date", bsonx.TypeName(v))
	}
	return formatDate(format, d, loc)
}

// parseDateString parses $dateFromString input, with a format or in the
// ISO-8601-like forms mongod accepts without one.
func parseDateString(s, format string, loc *time.Location) (bson.DateTime, error) {
	if format != "" {
		return parseWithFormat(s, format, loc)
	}
	str := strings.TrimSpace(s)
	layouts := []string{
		"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04:05.999999999Z07",
		"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02", "2006/01/02 15:04:05.999999999", "2006/01/02",
		"Jan 2, 2006", "January 2, 2006", "Jan 2 2006", "2 Jan 2006", "Mon, 02 Jan 2006 15:04:05 MST",
		"2006-01-02T15:04:05.999999999 MST",
	}
	for _, l := range layouts {
		if t, err := time.ParseInLocation(l, str, loc); err == nil {
			return fromTime(t), nil
		}
	}
	return 0, mongoerr.New(241, "Error parsing date string '%s'", s)
}

func parseWithFormat(s, format string, loc *time.Location) (bson.DateTime, error) {
	year, month, day, hour, minute, sec, ms := 1970, 1, 1, 0, 0, 0, 0
	isoYear, isoWeek, isoDay := -1, -1, -1
	off, hasOff := 0, false
	i := 0
	num := func(maxDigits int) (int, bool) {
		j := i
		neg := false
		if j < len(s) && (s[j] == '-' || s[j] == '+') && maxDigits > 4 {
			neg = s[j] == '-'
			j++
		}
		st := j
		for j < len(s) && j-st < maxDigits && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == st {
			return 0, false
		}
		n, _ := strconv.Atoi(s[st:j])
		i = j
		if neg {
			n = -n
		}
		return n, true
	}
	fail := func() (bson.DateTime, error) {
		return 0, mongoerr.New(241, "Error parsing date string '%s' with format '%s'", s, format)
	}
	for f := 0; f < len(format); f++ {
		c := format[f]
		if c != '%' {
			if i >= len(s) || s[i] != c {
				return fail()
			}
			i++
			continue
		}
		f++
		if f >= len(format) {
			return 0, mongoerr.New(18535, "Unmatched '%%' at end of format string")
		}
		var ok bool
		switch format[f] {
		case 'Y':
			year, ok = num(4)
		case 'm':
			month, ok = num(2)
		case 'd':
			day, ok = num(2)
		case 'H':
			hour, ok = num(2)
		case 'M':
			minute, ok = num(2)
		case 'S':
			sec, ok = num(2)
		case 'L':
			st := i
			ms, ok = num(3)
			for n := i - st; n < 3; n++ {
				ms *= 10
			}
		case 'j':
			var yd int
			yd, ok = num(3)
			month, day = 1, yd
		case 'G':
			isoYear, ok = num(4)
		case 'V':
			isoWeek, ok = num(2)
		case 'u':
			isoDay, ok = num(1)
		case 'z':
			if i < len(s) && (s[i] == '+' || s[i] == '-') {
				sign := 1
				if s[i] == '-' {
					sign = -1
				}
				i++
				var h, m int
				if h, ok = num(2); ok {
					if i < len(s) && s[i] == ':' {
						i++
					}
					m, ok = num(2)
				}
				off, hasOff = sign*(h*3600+m*60), true
			}
		case 'Z':
			var mins int
			mins, ok = num(6)
			off, hasOff = mins*60, true
		case 'b', 'B':
			ok = false
			for mi, n := range monthNames {
				for _, cand := range []string{n, n[:3]} {
					if !ok && strings.HasPrefix(strings.ToLower(s[i:]), strings.ToLower(cand)) {
						month, ok = mi+1, true
						i += len(cand)
					}
				}
			}
		case '%':
			ok = i < len(s) && s[i] == '%'
			i++
		default:
			return 0, mongoerr.New(18536, "Invalid format character '%%%c' in format string", format[f])
		}
		if !ok {
			return fail()
		}
	}
	if i != len(s) {
		return fail()
	}
	if hasOff {
		loc = time.FixedZone("", off)
	}
	if isoYear >= 0 {
		if isoWeek < 0 {
			isoWeek = 1
		}
		if isoDay < 0 {
			isoDay = 1
		}
		t := isoDate(isoYear, isoWeek, isoDay, loc)
		return fromTime(t.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute + time.Duration(sec)*time.Second + time.Duration(ms)*time.Millisecond)), nil
	}
	if month < 1 || month > 12 || day < 1 || day > 366 || hour > 24 || minute > 59 || sec > 60 {
		return fail()
	}
	return fromTime(time.Date(year, time.Month(month), day, hour, minute, sec, ms*1e6, loc)), nil
}

// isoDate returns midnight of the given ISO week date.
func isoDate(year, week, dow int, loc *time.Location) time.Time {
	jan4 := time.Date(year, 1, 4, 0, 0, 0, 0, loc)
	wd := int(jan4.Weekday())
	if wd == 0 {
		wd = 7
	}
	mon := jan4.AddDate(0, 0, 1-wd)
	return mon.AddDate(0, 0, (week-1)*7+dow-1)
}

type dateFromString struct {
	str, format, tz, onError, onNull Expr
}

func (e *dateFromString) Eval(env *Env) (any, error) {
	v, err := e.str.Eval(env)
	if err != nil {
		return nil, err
	}
	format := ""
	if e.format != nil {
		f, err := e.format.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(f) {
			return nil, nil
		}
		fs, ok := f.(string)
		if !ok {
			return nil, mongoerr.New(40684, "$dateFromString requires that 'format' be a string, found: %s with value %s", bsonx.TypeName(f), ExtJSON(f))
		}
		format = fs
	}
	loc, ok, err := evalTZ(e.tz, env)
	if err != nil || !ok {
		return nil, err
	}
	if IsNullish(v) {
		if e.onNull != nil {
			return e.onNull.Eval(env)
		}
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		if e.onError != nil {
			return e.onError.Eval(env)
		}
		return nil, mongoerr.New(241, "$dateFromString requires that 'dateString' be a string, found: %s with value %s", bsonx.TypeName(v), ExtJSON(v))
	}
	d, err := parseDateString(s, format, loc)
	if err != nil {
		if e.onError != nil {
			return e.onError.Eval(env)
		}
		return nil, err
	}
	return d, nil
}

type dateToParts struct {
	date, tz, iso Expr
}

func (e *dateToParts) Eval(env *Env) (any, error) {
	d, ok, err := evalDate(e.date, env, 16006)
	if err != nil || !ok {
		return nil, err
	}
	loc, ok, err := evalTZ(e.tz, env)
	if err != nil || !ok {
		return nil, err
	}
	iso := false
	if e.iso != nil {
		v, err := e.iso.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		b, ok := v.(bool)
		if !ok {
			return nil, mongoerr.New(40521, "iso8601 must evaluate to a bool, found %s", bsonx.TypeName(v))
		}
		iso = b
	}
	t := goTime(d, loc)
	rest := bson.D{
		{Key: "hour", Value: int32(t.Hour())}, {Key: "minute", Value: int32(t.Minute())},
		{Key: "second", Value: int32(t.Second())}, {Key: "millisecond", Value: int32(t.Nanosecond() / 1e6)},
	}
	if iso {
		y, w := t.ISOWeek()
		return append(bson.D{{Key: "isoWeekYear", Value: int32(y)}, {Key: "isoWeek", Value: int32(w)}, {Key: "isoDayOfWeek", Value: isoDOW(t)}}, rest...), nil
	}
	return append(bson.D{{Key: "year", Value: int32(t.Year())}, {Key: "month", Value: int32(t.Month())}, {Key: "day", Value: int32(t.Day())}}, rest...), nil
}

type dateFromParts struct {
	names []string
	parts []Expr
	tz    Expr
	iso   bool
}

func (e *dateFromParts) Eval(env *Env) (any, error) {
	vals := map[string]int64{"month": 1, "day": 1, "isoWeek": 1, "isoDayOfWeek": 1}
	for i, n := range e.names {
		v, err := e.parts[i].Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		if !bsonx.IsNumber(v) {
			return nil, mongoerr.New(40515, "'%s' must evaluate to an integer, found %s with value %s", n, bsonx.TypeName(v), ExtJSON(v))
		}
		iv, ok := bsonx.ToInt64(v)
		if !ok {
			return nil, mongoerr.New(40515, "'%s' must evaluate to an integer, found %s with value %s", n, bsonx.TypeName(v), ExtJSON(v))
		}
		switch n {
		case "year":
			if iv < 1 || iv > 9999 {
				return nil, mongoerr.New(40523, "'year' must evaluate to an integer in the range 1 to 9999, found %d", iv)
			}
		case "isoWeekYear":
			if iv < 1 || iv > 9999 {
				return nil, mongoerr.New(31095, "'isoWeekYear' must evaluate to an integer in the range 1 to 9999, found %d", iv)
			}
		case "second", "millisecond":
		default:
			if iv >= -32768 && iv <= 32767 {
				break
			}
			return nil, mongoerr.New(31034, "'%s' must evaluate to a value in the range [-32768, 32767]; value %d is not in range", n, iv)
		}
		vals[n] = iv
	}
	loc, ok, err := evalTZ(e.tz, env)
	if err != nil || !ok {
		return nil, err
	}
	var t time.Time
	if e.iso {
		t = isoDate(int(vals["isoWeekYear"]), 1, 1, loc).AddDate(0, 0, int((vals["isoWeek"]-1)*7+vals["isoDayOfWeek"]-1))
	} else {
		t = time.Date(int(vals["year"]), time.Month(vals["month"]), int(vals["day"]), 0, 0, 0, 0, loc)
	}
	ms := ((vals["hour"]*60+vals["minute"])*60+vals["second"])*1000 + vals["millisecond"]
	return bson.DateTime(t.UnixMilli() + ms), nil
}

// date arithmetic units
var unitMillis = map[string]int64{
	"millisecond": 1, "second": 1000, "minute": 60000, "hour": 3600000, "day": 86400000, "week": 7 * 86400000,
}

func validUnit(u string) bool {
	switch u {
	case "year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond":
		return true
	}
	return false
}

func evalUnit(e Expr, env *Env, op string) (string, bool, error) {
	v, err := e.Eval(env)
	if err != nil {
		return "", false, err
	}
	if IsNullish(v) {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, mongoerr.New(5439013, "%s requires 'unit' to be a string, but got %s", op, bsonx.TypeName(v))
	}
	if !validUnit(s) {
		return "", false, mongoerr.New(mongoerr.FailedToParse, "%s parameter 'unit' value parsing failed :: caused by :: unknown time unit value: %s", op, s)
	}
	return s, true, nil
}

// addUnits adds amount units to t (calendar arithmetic in t's location for
// day and larger units, clamping the day of month like mongod).
func addUnits(t time.Time, unit string, amount int64) time.Time {
	switch unit {
	case "year", "quarter", "month":
		months := amount
		if unit == "year" {
			months *= 12
		} else if unit == "quarter" {
			months *= 3
		}
		y, m, d := t.Date()
		total := int64(y)*12 + int64(m-1) + months
		ny, nm := int(total/12), time.Month(total%12+1)
		if total < 0 && total%12 != 0 {
			ny--
			nm = time.Month(total%12 + 13)
		}
		last := time.Date(ny, nm+1, 0, 0, 0, 0, 0, t.Location()).Day()
		if d > last {
			d = last
		}
		return time.Date(ny, nm, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	case "week", "day":
		days := amount
		if unit == "week" {
			days *= 7
		}
		return t.AddDate(0, 0, int(days))
	}
	return t.Add(time.Duration(amount*unitMillis[unit]) * time.Millisecond)
}

type dateAdd struct {
	name                    string
	start, unit, amount, tz Expr
	sign                    int64
}

func (e *dateAdd) Eval(env *Env) (any, error) {
	d, ok, err := evalDate(e.start, env, 5166403)
	if err != nil {
		return nil, err
	}
	u, uok, err := evalUnit(e.unit, env, e.name)
	if err != nil {
		return nil, err
	}
	av, err := e.amount.Eval(env)
	if err != nil {
		return nil, err
	}
	loc, tzok, err := evalTZ(e.tz, env)
	if err != nil {
		return nil, err
	}
	if !ok || !uok || !tzok || IsNullish(av) {
		return nil, nil
	}
	amt, aok := intArg(av)
	if !aok {
		return nil, mongoerr.New(5166405, "%s expects integer amount of time units", e.name)
	}
	if e.sign < 0 && amt == math.MinInt64 {
		return nil, mongoerr.New(6045000, "invalid $dateSubtract 'amount' parameter value: %d", amt)
	}
	t := addUnits(goTime(d, loc), u, amt*e.sign)
	return fromTime(t), nil
}

func parseStartOfWeek(op string, v any) (time.Weekday, error) {
	s, ok := v.(string)
	if !ok {
		return 0, mongoerr.New(5439015, "%s requires 'startOfWeek' to be a string, but got %s", op, bsonx.TypeName(v))
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		n := strings.ToLower(d.String())
		if strings.EqualFold(s, n) || strings.EqualFold(s, n[:3]) {
			return d, nil
		}
	}
	return 0, mongoerr.New(5439016, "%s parameter 'startOfWeek' value cannot be recognized as a day of a week: %s", op, s)
}

// truncUnit truncates t to the start of its unit (weeks start on sow).
func truncUnit(t time.Time, unit string, sow time.Weekday) time.Time {
	loc := t.Location()
	switch unit {
	case "year":
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, loc)
	case "quarter":
		return time.Date(t.Year(), (t.Month()-1)/3*3+1, 1, 0, 0, 0, 0, loc)
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	case "week":
		back := (int(t.Weekday()) - int(sow) + 7) % 7
		return time.Date(t.Year(), t.Month(), t.Day()-back, 0, 0, 0, 0, loc)
	case "day":
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	}
	// sub-day units truncate in absolute time, adjusted to the zone offset
	_, off := t.Zone()
	ms := t.UnixMilli() + int64(off)*1000
	u := unitMillis[unit]
	r := ms % u
	if r < 0 {
		r += u
	}
	return time.UnixMilli(t.UnixMilli() - r).In(loc)
}

func daysBetween(a, b time.Time) int64 {
	da := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)
	db := time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)
	return int64(db.Sub(da).Hours() / 24)
}

func dateDiff(a, b time.Time, unit string, sow time.Weekday) int64 {
	switch unit {
	case "year":
		return int64(b.Year() - a.Year())
	case "quarter":
		return int64(b.Year()-a.Year())*4 + int64((int(b.Month())-1)/3-(int(a.Month())-1)/3)
	case "month":
		return int64(b.Year()-a.Year())*12 + int64(b.Month()-a.Month())
	case "week":
		return daysBetween(truncUnit(a, "week", sow), truncUnit(b, "week", sow)) / 7
	case "day":
		return daysBetween(a, b)
	}
	u := unitMillis[unit]
	return floorDiv(truncUnit(b, unit, 0).UnixMilli(), u) - floorDiv(truncUnit(a, unit, 0).UnixMilli(), u)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

type dateDiffExpr struct {
	start, end, unit, tz, sow Expr
}

func (e *dateDiffExpr) Eval(env *Env) (any, error) {
	a, aok, err := evalDate(e.start, env, 5166307)
	if err != nil {
		return nil, err
	}
	b, bok, err := evalDate(e.end, env, 5166307)
	if err != nil {
		return nil, err
	}
	u, uok, err := evalUnit(e.unit, env, "$dateDiff")
	if err != nil {
		return nil, err
	}
	loc, tzok, err := evalTZ(e.tz, env)
	if err != nil {
		return nil, err
	}
	sow := time.Sunday
	if e.sow != nil && u == "week" {
		v, err := e.sow.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		if sow, err = parseStartOfWeek("$dateDiff", v); err != nil {
			return nil, err
		}
	}
	if !aok || !bok || !uok || !tzok {
		return nil, nil
	}
	return dateDiff(goTime(a, loc), goTime(b, loc), u, sow), nil
}

type dateTruncExpr struct {
	date, unit, bin, tz, sow Expr
}

var truncRef = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (e *dateTruncExpr) Eval(env *Env) (any, error) {
	d, ok, err := evalDate(e.date, env, 5439012)
	if err != nil || !ok {
		return nil, err
	}
	u, uok, err := evalUnit(e.unit, env, "$dateTrunc")
	if err != nil || !uok {
		return nil, err
	}
	bin := int64(1)
	if e.bin != nil {
		v, err := e.bin.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		b, ok := intArg(v)
		if !ok {
			return nil, mongoerr.New(5439017, "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '%s' of type %s", ExtJSON(v), bsonx.TypeName(v))
		}
		if b <= 0 {
			return nil, mongoerr.New(5439018, "$dateTrunc requires 'binSize' to be greater than 0, but got value %d", b)
		}
		bin = b
	}
	loc, tzok, err := evalTZ(e.tz, env)
	if err != nil || !tzok {
		return nil, err
	}
	sow := time.Sunday
	if e.sow != nil && u == "week" {
		v, err := e.sow.Eval(env)
		if err != nil {
			return nil, err
		}
		if IsNullish(v) {
			return nil, nil
		}
		if sow, err = parseStartOfWeek("$dateTrunc", v); err != nil {
			return nil, err
		}
	}
	t := goTime(d, loc)
	if bin == 1 {
		return fromTime(truncUnit(t, u, sow)), nil
	}
	ref := time.Date(2000, 1, 1, 0, 0, 0, 0, loc)
	if u == "week" {
		ref = truncUnit(ref, "week", sow)
		if ref.Before(time.Date(2000, 1, 1, 0, 0, 0, 0, loc)) {
			ref = ref.AddDate(0, 0, 7)
		}
	}
	n := dateDiff(ref, t, u, sow)
	n = floorDiv(n, bin) * bin
	r := addUnits(ref, u, n)
	if r.After(t) {
		r = addUnits(ref, u, n-bin)
	}
	return fromTime(r), nil
}

func namedArgs(name string, args any, required []string, optional ...string) (map[string]any, error) {
	d, ok := args.(bson.D)
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "%s only supports an object as its argument", name)
	}
	all := append(append([]string{}, required...), optional...)
	if k := firstUnknown(d, all...); k != "" {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Unrecognized argument to %s: %s", name, k)
	}
	m := map[string]any{}
	for _, e := range d {
		m[e.Key] = e.Value
	}
	for _, r := range required {
		if _, ok := m[r]; !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Missing '%s' parameter to %s", r, name)
		}
	}
	return m, nil
}

func compileAll(m map[string]any, s *scope, keys ...string) (map[string]Expr, error) {
	out := map[string]Expr{}
	for _, k := range keys {
		e, err := compileOpt(m, k, s)
		if err != nil {
			return nil, err
		}
		out[k] = e
	}
	return out, nil
}

func init() {
	for name, fn := range dateParts {
		fn := fn
		register(func(name string, args any, s *scope) (Expr, error) {
			da, err := compileDateArgs(name, args, s)
			if err != nil {
				return nil, err
			}
			return &datePart{da, fn}, nil
		}, name)
	}
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(18629, "$dateToString only supports an object as its argument")
		}
		if k := firstUnknown(d, "date", "format", "timezone", "onNull"); k != "" {
			return nil, mongoerr.New(18534, "Unrecognized argument to $dateToString: %s", k)
		}
		m, _ := namedArgs(name, args, nil, "date", "format", "timezone", "onNull")
		if _, ok := m["date"]; !ok {
			return nil, mongoerr.New(18628, "Missing 'date' parameter to $dateToString")
		}
		c, err := compileAll(m, s, "date", "format", "timezone", "onNull")
		if err != nil {
			return nil, err
		}
		if f, ok := Constant(c["format"]); ok && c["format"] != nil {
			if fs, ok := f.(string); ok {
				if _, err := formatDate(fs, 0, time.UTC); err != nil {
					return nil, err
				}
			}
		}
		return &dateToString{c["date"], c["format"], c["timezone"], c["onNull"]}, nil
	}, "$dateToString")
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(40540, "$dateFromString only supports an object as an argument, found: %s", bsonx.TypeName(args))
		}
		if k := firstUnknown(d, "dateString", "format", "timezone", "onError", "onNull"); k != "" {
			return nil, mongoerr.New(40541, "Unrecognized argument to $dateFromString: %s", k)
		}
		m, _ := namedArgs(name, args, nil, "dateString", "format", "timezone", "onError", "onNull")
		if _, ok := m["dateString"]; !ok {
			return nil, mongoerr.New(40542, "Missing 'dateString' parameter to $dateFromString")
		}
		c, err := compileAll(m, s, "dateString", "format", "timezone", "onError", "onNull")
		if err != nil {
			return nil, err
		}
		return &dateFromString{c["dateString"], c["format"], c["timezone"], c["onError"], c["onNull"]}, nil
	}, "$dateFromString")
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(40524, "$dateToParts only supports an object as its argument")
		}
		if k := firstUnknown(d, "date", "timezone", "iso8601"); k != "" {
			return nil, mongoerr.New(40520, "Unrecognized argument to $dateToParts: %s", k)
		}
		m, _ := namedArgs(name, args, nil, "date", "timezone", "iso8601")
		if _, ok := m["date"]; !ok {
			return nil, mongoerr.New(40522, "Missing 'date' parameter to $dateToParts")
		}
		c, err := compileAll(m, s, "date", "timezone", "iso8601")
		if err != nil {
			return nil, err
		}
		return &dateToParts{c["date"], c["timezone"], c["iso8601"]}, nil
	}, "$dateToParts")
	register(func(name string, args any, s *scope) (Expr, error) {
		d, ok := args.(bson.D)
		if !ok {
			return nil, mongoerr.New(40519, "$dateFromParts only supports an object as its argument")
		}
		e := &dateFromParts{}
		hasYear, hasISO := false, false
		for _, el := range d {
			switch el.Key {
			case "year", "month", "day":
				hasYear = true
			case "isoWeekYear", "isoWeek", "isoDayOfWeek":
				hasISO = true
			case "hour", "minute", "second", "millisecond":
			case "timezone":
				tz, err := compile(el.Value, s)
				if err != nil {
					return nil, err
				}
				e.tz = tz
				continue
			default:
				return nil, mongoerr.New(40518, "Unrecognized argument to $dateFromParts: %s", el.Key)
			}
			x, err := compile(el.Value, s)
			if err != nil {
				return nil, err
			}
			e.names = append(e.names, el.Key)
			e.parts = append(e.parts, x)
		}
		_, y := bsonx.Get(d, "year")
		_, iy := bsonx.Get(d, "isoWeekYear")
		switch {
		case hasYear && hasISO:
			return nil, mongoerr.New(40489, "$dateFromParts does not allow mixing natural dates with ISO dates")
		case !y && !iy:
			return nil, mongoerr.New(40516, "$dateFromParts requires either 'year' or 'isoWeekYear' to be present")
		}
		e.iso = hasISO
		return e, nil
	}, "$dateFromParts")
	for _, n := range []string{"$dateAdd", "$dateSubtract"} {
		register(func(name string, args any, s *scope) (Expr, error) {
			m, err := namedArgs(name, args, []string{"startDate", "unit", "amount"}, "timezone")
			if err != nil {
				return nil, err
			}
			c, err := compileAll(m, s, "startDate", "unit", "amount", "timezone")
			if err != nil {
				return nil, err
			}
			sign := int64(1)
			if name == "$dateSubtract" {
				sign = -1
			}
			return &dateAdd{name, c["startDate"], c["unit"], c["amount"], c["timezone"], sign}, nil
		}, n)
	}
	register(func(name string, args any, s *scope) (Expr, error) {
		m, err := namedArgs(name, args, []string{"startDate", "endDate", "unit"}, "timezone", "startOfWeek")
		if err != nil {
			return nil, err
		}
		c, err := compileAll(m, s, "startDate", "endDate", "unit", "timezone", "startOfWeek")
		if err != nil {
			return nil, err
		}
		return &dateDiffExpr{c["startDate"], c["endDate"], c["unit"], c["timezone"], c["startOfWeek"]}, nil
	}, "$dateDiff")
	register(func(name string, args any, s *scope) (Expr, error) {
		m, err := namedArgs(name, args, []string{"date", "unit"}, "binSize", "timezone", "startOfWeek")
		if err != nil {
			return nil, err
		}
		c, err := compileAll(m, s, "date", "unit", "binSize", "timezone", "startOfWeek")
		if err != nil {
			return nil, err
		}
		return &dateTruncExpr{c["date"], c["unit"], c["binSize"], c["timezone"], c["startOfWeek"]}, nil
	}, "$dateTrunc")
}
