package layout

import (
	"encoding/json"
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
)

// ClassSummary aggregates a plan's entries of one class (or, for the total
// row, of every class; its Class is ClassInvalid).
type ClassSummary struct {
	Class         Class
	Format        string // the class's format, or "mixed" when its tensors differ
	Tensors       int
	Params        int64   // elements
	Bytes         int64   // encoded bytes, alignment padding excluded
	BitsPerWeight float64 // 8·Bytes/Params (0 without params)
}

// Total reports whether s is the total row.
func (s ClassSummary) Total() bool { return s.Class == ClassInvalid }

// Label is the class name, or "total" for the total row.
func (s ClassSummary) Label() string {
	if s.Total() {
		return "total"
	}
	return s.Class.String()
}

// classSummaryJSON is the JSON form of a ClassSummary; the total row's class
// is "total".
type classSummaryJSON struct {
	Class         string  `json:"class"`
	Format        string  `json:"format"`
	Tensors       int     `json:"tensors"`
	Params        int64   `json:"params"`
	Bytes         int64   `json:"bytes"`
	BitsPerWeight float64 `json:"bits_per_weight"`
}

// MarshalJSON writes the row with snake_case keys and the class as its
// Label ("total" for the total row).
func (s ClassSummary) MarshalJSON() ([]byte, error) {
	if !s.Total() && !s.Class.Valid() {
		return nil, fmt.Errorf("layout: invalid class %d in summary", uint8(s.Class))
	}
	return json.Marshal(classSummaryJSON{s.Label(), s.Format, s.Tensors, s.Params, s.Bytes, s.BitsPerWeight})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *ClassSummary) UnmarshalJSON(b []byte) error {
	var j classSummaryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	c := ClassInvalid
	if j.Class != "total" {
		var err error
		if c, err = ParseClass(j.Class); err != nil {
			return err
		}
	}
	*s = ClassSummary{c, j.Format, j.Tensors, j.Params, j.Bytes, j.BitsPerWeight}
	return nil
}

// Summary returns one row per class present in the plan, in class order,
// followed by a total row, for `dgq quantize --dry-run`.
func (p *Plan) Summary() []ClassSummary {
	var rows []ClassSummary
	total := ClassSummary{Class: ClassInvalid}
	var totalFormats []codecs.Format
	for _, c := range Classes() {
		row := ClassSummary{Class: c}
		var formats []codecs.Format
		for _, e := range p.Entries {
			if e.Class != c {
				continue
			}
			m, err := codecs.FlattenShape(e.Shape)
			if err == nil {
				row.Params += m.Elements()
			}
			row.Tensors++
			row.Bytes += e.Size
			formats = addFormat(formats, e.Format)
			totalFormats = addFormat(totalFormats, e.Format)
		}
		if row.Tensors == 0 {
			continue
		}
		row.Format = formatLabel(formats)
		row.BitsPerWeight = bpw(row.Bytes, row.Params)
		rows = append(rows, row)
		total.Tensors += row.Tensors
		total.Params += row.Params
		total.Bytes += row.Bytes
	}
	total.Format = formatLabel(totalFormats)
	total.BitsPerWeight = bpw(total.Bytes, total.Params)
	return append(rows, total)
}

func addFormat(fs []codecs.Format, f codecs.Format) []codecs.Format {
	for _, g := range fs {
		if g == f {
			return fs
		}
	}
	return append(fs, f)
}

func formatLabel(fs []codecs.Format) string {
	switch len(fs) {
	case 0:
		return ""
	case 1:
		return fs[0].String()
	}
	return "mixed"
}

func bpw(bytes, params int64) float64 {
	if params == 0 {
		return 0
	}
	return 8 * float64(bytes) / float64(params)
}
