package layout

import (
	"fmt"
	"reflect"
)

// ConfigDiff names the fields in which two configs differ, in field order,
// each as "Path a vs b" (Text.HiddenSize 128 vs 96; values clipped to 40
// characters); nil when they are equal. Callers that compare a pack with
// its source (verify, repack --overlay) name the first differences.
func ConfigDiff(a, b *Config) []string {
	var diffs []string
	var walk func(prefix string, x, y reflect.Value)
	walk = func(prefix string, x, y reflect.Value) {
		for i := range x.NumField() {
			f := x.Type().Field(i)
			xv, yv := x.Field(i), y.Field(i)
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(prefix+f.Name+".", xv, yv)
			case !reflect.DeepEqual(xv.Interface(), yv.Interface()):
				diffs = append(diffs, fmt.Sprintf("%s%s %s vs %s", prefix, f.Name, clipValue(xv), clipValue(yv)))
			}
		}
	}
	walk("", reflect.ValueOf(*a), reflect.ValueOf(*b))
	return diffs
}

// clipValue prints a config value for a message, at most 40 characters.
func clipValue(v reflect.Value) string {
	s := fmt.Sprint(v.Interface())
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}
