package generate

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// readGenConfig reads a fixture's generation_config.json.
func readGenConfig(t testing.TB, fx string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixture.SnapshotDir(t, fx), "generation_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Every random-weight fixture ships the released checkpoint's
// generation_config.json, which equals the class defaults; the trained one
// asks for two 32-token blocks (max_new_tokens 64).
func TestParseConfigFixture(t *testing.T) {
	want := &Config{
		MaxNewTokens: 256, MaxDenoisingSteps: 48, EntropyBound: 0.1, TMin: 0.4, TMax: 0.8,
		StabilityThreshold: 1, ConfidenceThreshold: 0.005, EOSTokenIDs: []int{1, 106, 50},
		PadTokenID: 0, BOSTokenID: 2,
	}
	if !reflect.DeepEqual(want, DefaultConfig()) {
		t.Fatalf("defaults %+v\nwant %+v", DefaultConfig(), want)
	}
	for _, fx := range fixture.Names {
		gc, err := ParseConfig(readGenConfig(t, fx))
		if err != nil {
			t.Fatalf("%s: %v", fx, err)
		}
		w := *want
		if fx == "trained" || fx == "converging" { // generate two blocks of 32
			w.MaxNewTokens = 64
		}
		if !reflect.DeepEqual(gc, &w) {
			t.Errorf("%s: got %+v\nwant %+v", fx, gc, &w)
		}
	}
}

func TestParseConfigValid(t *testing.T) {
	tests := []struct {
		name string
		json string
		want func(*Config)
	}{
		{"empty object takes defaults", `{}`, func(*Config) {}},
		{"nulls take defaults", `{"max_new_tokens": null, "eos_token_id": null, "sampler_config": null, "pad_token_id": null}`, func(*Config) {}},
		{"eos as int", `{"eos_token_id": 106}`, func(g *Config) { g.EOSTokenIDs = []int{106} }},
		{"empty eos list", `{"eos_token_id": []}`, func(g *Config) { g.EOSTokenIDs = []int{} }},
		{"max_length", `{"max_length": 300}`, func(g *Config) { g.MaxLength = 300 }},
		{"all values", `{"max_new_tokens": 300, "max_denoising_steps": 12,
			"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 2.5e-1},
			"t_min": 0, "t_max": 1, "stability_threshold": 0, "confidence_threshold": 0.5,
			"bos_token_id": 5, "pad_token_id": 7, "eos_token_id": [9]}`, func(g *Config) {
			*g = Config{MaxNewTokens: 300, MaxDenoisingSteps: 12, EntropyBound: 0.25, TMin: 0, TMax: 1,
				StabilityThreshold: 0, ConfidenceThreshold: 0.5, BOSTokenID: 5, PadTokenID: 7, EOSTokenIDs: []int{9}}
		}},
		{"sampler without bound", `{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig"}}`, func(*Config) {}},
		{"accepted no-op and metadata keys", `{"return_dict_in_generate": true, "cache_implementation": "dynamic",
			"cache_config": {}, "disable_compile": false, "transformers_version": "5.17.0",
			"_from_model_config": false, "_commit_hash": null}`, func(*Config) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gc, err := ParseConfig([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultConfig()
			tc.want(want)
			if !reflect.DeepEqual(gc, want) {
				t.Fatalf("got %+v\nwant %+v", gc, want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		json string
		key  string // the error must name it
	}{
		{`[]`, "generation_config.json"},
		{`{"max_new_tokens": 1`, "generation_config.json"},
		{`{"temperature": 0.7}`, "temperature"},
		{`{"top_k": 50, "do_sample": true}`, "do_sample, top_k"},
		{`{"foo": "bar"}`, "foo"},
		{`{"max_new_tokens": 0}`, "max_new_tokens"},
		{`{"max_new_tokens": 1048577}`, "max_new_tokens"},
		{`{"max_new_tokens": 256.0}`, "max_new_tokens"},
		{`{"max_new_tokens": "256"}`, "max_new_tokens"},
		{`{"max_new_tokens": 99999999999999999999999}`, "max_new_tokens"},
		{`{"max_length": 0}`, "max_length"},
		{`{"max_denoising_steps": 0}`, "max_denoising_steps"},
		{`{"max_denoising_steps": 4097}`, "max_denoising_steps"},
		{`{"t_min": 0.8, "t_max": 0.8}`, "t_max"},
		{`{"t_min": 0.9}`, "t_min"},
		{`{"t_min": -0.1}`, "t_min"},
		{`{"t_max": 0}`, "t_max"},
		{`{"t_max": 1e400}`, "t_max"},
		{`{"t_max": true}`, "t_max"},
		{`{"stability_threshold": -1}`, "stability_threshold"},
		{`{"stability_threshold": 1.5}`, "stability_threshold"},
		{`{"confidence_threshold": 0}`, "confidence_threshold"},
		{`{"confidence_threshold": -0.005}`, "confidence_threshold"},
		{`{"pad_token_id": -1}`, "pad_token_id"},
		{`{"bos_token_id": 16777216}`, "bos_token_id"},
		{`{"eos_token_id": "1"}`, "eos_token_id"},
		{`{"eos_token_id": [1, -2]}`, "eos_token_id[1]"},
		{`{"eos_token_id": [1, 2.5]}`, "eos_token_id[1]"},
		{`{"eos_token_id": {"a": 1}}`, "eos_token_id"},
		{`{"return_dict_in_generate": 1}`, "return_dict_in_generate"},
		{`{"disable_compile": "no"}`, "disable_compile"},
		{`{"cache_implementation": 3}`, "cache_implementation"},
		{`{"cache_config": []}`, "cache_config"},
		{`{"transformers_version": 5}`, "transformers_version"},
		{`{"sampler_config": 0.1}`, "sampler_config"},
		{`{"sampler_config": {"entropy_bound": 0.1}}`, "sampler_config._cls_name"},
		{`{"sampler_config": {"_cls_name": "DiscreteDDIMSamplerConfig"}}`, "sampler_config._cls_name"},
		{`{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 1}}`, "sampler_config.entropy_bound"},
		{`{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 0.0}}`, "sampler_config.entropy_bound"},
		{`{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": -0.1}}`, "sampler_config.entropy_bound"},
		{`{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": "0.1"}}`, "sampler_config.entropy_bound"},
		{`{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "threshold": 0.9}}`, "threshold"},
	}
	for _, tc := range tests {
		gc, err := ParseConfig([]byte(tc.json))
		if err == nil {
			t.Errorf("%s: accepted as %+v", tc.json, gc)
			continue
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v does not wrap ErrConfig", tc.json, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "generate: ") || !strings.Contains(msg, tc.key) {
			t.Errorf("%s: error %q does not name %q", tc.json, msg, tc.key)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []struct {
		edit func(*Config)
		key  string
	}{
		{func(g *Config) { g.MaxNewTokens = 0 }, "max_new_tokens"},
		{func(g *Config) { g.MaxDenoisingSteps = 5000 }, "max_denoising_steps"},
		{func(g *Config) { g.TMax = g.TMin }, "t_max"},
		{func(g *Config) { g.EntropyBound = 0 }, "entropy_bound"},
		{func(g *Config) { g.ConfidenceThreshold = -1 }, "confidence_threshold"},
		{func(g *Config) { g.EOSTokenIDs = []int{-1} }, "eos_token_id"},
		{func(g *Config) { g.MaxLength = -1 }, "max_length"},
	}
	for _, tc := range bad {
		gc := DefaultConfig()
		tc.edit(gc)
		err := gc.validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%+v: got %v, want an error naming %s", gc, err, tc.key)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, fx := range fixture.Names {
		f.Add(readGenConfig(f, fx))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"eos_token_id": 1, "max_length": 20, "t_min": 0, "t_max": 1e-3}`))
	f.Add([]byte(`{"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 1e-9}}`))
	f.Add([]byte(`{"max_new_tokens": -0, "t_max": 1E2, "eos_token_id": [0, 16777215]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		gc, err := ParseConfig(data)
		if err != nil {
			if gc != nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), "generate: ") {
				t.Fatalf("bad failure: %v, %+v", err, gc)
			}
			return
		}
		if err := gc.validate(); err != nil {
			t.Fatalf("accepted an invalid config %+v: %v", gc, err)
		}
		if gc.TMax <= gc.TMin || !(Temperature(gc, 1) > 0) {
			t.Fatalf("temperature schedule not positive: %+v", gc)
		}
	})
}
