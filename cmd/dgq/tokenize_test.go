package main

import (
	"encoding/json"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

func TestTokenizeMatchesReference(t *testing.T) {
	var ref struct {
		Cases []struct {
			Text           string `json:"text"`
			IDsWithSpecial []int  `json:"ids_with_special"`
		} `json:"cases"`
	}
	b, _ := testmodel.ReadReference("tokenizer_reference.json")
	json.Unmarshal(b, &ref)
	snap := tiny(t)
	for _, c := range ref.Cases {
		r := dgqRun("tokenize", snap, c.Text, "--json")
		var out struct {
			IDs []int `json:"ids"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
			t.Fatalf("tokenize %q: %d %s", c.Text, r.code, r.stderr)
		}
		if len(out.IDs) != len(c.IDsWithSpecial) {
			t.Fatalf("tokenize %q: %v, want %v", c.Text, out.IDs, c.IDsWithSpecial)
		}
		for i := range out.IDs {
			if out.IDs[i] != c.IDsWithSpecial[i] {
				t.Fatalf("tokenize %q: %v, want %v", c.Text, out.IDs, c.IDsWithSpecial)
			}
		}
	}
}
