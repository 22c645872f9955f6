package metal_test

import (
	"strings"
	"testing"
)

// validationSetup says what is wrong with Metal's validation variables in
// env ("" when nothing): shader validation reports to the OS log unless
// told to write to stderr and to fail the command buffer (which the engine
// turns into ErrCommand), and the API validation layer's default mode
// aborts the whole test binary at its first report. The device tests'
// TestMain (main_darwin_test.go) refuses to run with them set so.
func validationSetup(env func(string) string) string {
	if env("MTL_SHADER_VALIDATION") == "1" {
		for _, v := range []string{"MTL_SHADER_VALIDATION_REPORT_TO_STDERR", "MTL_SHADER_VALIDATION_ENABLE_ERROR_REPORTING"} {
			if env(v) != "1" {
				return "MTL_SHADER_VALIDATION=1 needs " + v + "=1 too (otherwise its reports go to the OS log and fail nothing)"
			}
		}
	}
	if env("MTL_DEBUG_LAYER") == "1" && env("MTL_DEBUG_LAYER_ERROR_MODE") != "nslog" {
		return "MTL_DEBUG_LAYER=1 needs MTL_DEBUG_LAYER_ERROR_MODE=nslog (its default mode aborts the test binary at the first report)"
	}
	return ""
}

func TestValidationSetup(t *testing.T) {
	full := map[string]string{"MTL_SHADER_VALIDATION": "1", "MTL_SHADER_VALIDATION_REPORT_TO_STDERR": "1",
		"MTL_SHADER_VALIDATION_ENABLE_ERROR_REPORTING": "1", "MTL_DEBUG_LAYER": "1", "MTL_DEBUG_LAYER_ERROR_MODE": "nslog"}
	without := func(k string) map[string]string {
		m := map[string]string{}
		for kk, v := range full {
			if kk != k {
				m[kk] = v
			}
		}
		return m
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"none", nil, ""},
		{"all", full, ""},
		{"no stderr", without("MTL_SHADER_VALIDATION_REPORT_TO_STDERR"), "MTL_SHADER_VALIDATION_REPORT_TO_STDERR=1"},
		{"no error reporting", without("MTL_SHADER_VALIDATION_ENABLE_ERROR_REPORTING"), "ENABLE_ERROR_REPORTING=1"},
		{"assert mode", without("MTL_DEBUG_LAYER_ERROR_MODE"), "MTL_DEBUG_LAYER_ERROR_MODE=nslog"},
		{"layer alone", map[string]string{"MTL_DEBUG_LAYER": "1"}, "nslog"},
	} {
		got := validationSetup(func(k string) string { return c.env[k] })
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
