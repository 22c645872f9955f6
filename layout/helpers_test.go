package layout

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tinyTensors is the real tensor inventory of the tiny checkpoint.
func tinyTensors(t testing.TB) []Tensor {
	t.Helper()
	var out []Tensor
	sc := bufio.NewScanner(strings.NewReader(string(readTestdata(t, "tiny_tensors.txt"))))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("bad line %q", line)
		}
		dt, err := codecs.ParseDType(f[1])
		if err != nil {
			t.Fatal(err)
		}
		var shape []int64
		if err := json.Unmarshal([]byte(f[2]), &shape); err != nil {
			t.Fatal(err)
		}
		out = append(out, Tensor{Name: f[0], DType: dt, Shape: shape})
	}
	return out
}

func tinyConfig(t testing.TB) *Config {
	t.Helper()
	c, err := ParseConfig(readTestdata(t, "tiny_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hubConfig(t testing.TB) *Config {
	t.Helper()
	c, err := ParseConfig(readTestdata(t, "hub_26b_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustPolicy(t testing.TB, profile string, sets ...string) Policy {
	t.Helper()
	p, err := NewPolicy(profile, sets)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
