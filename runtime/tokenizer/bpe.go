package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeModel is the "BPE" model of tokenizer.json.
type bpeModel struct {
	vocab  map[string]int
	tokens []string // id → token string (model vocabulary only)
	known  []bool   // id → present in the model vocabulary
	maxID  int      // highest model id (-1 when the vocabulary is empty)

	// merges maps a pair of ids (left<<32 | right) to its rank (<<32) and the
	// id of the merged token.
	merges map[uint64]uint64

	unk          int // id of unk_token, -1 when unset
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int32 // id of "<0xXX>" per byte, -1 when absent
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// maxVocabID bounds ids so that the id-indexed tables stay small.
const maxVocabID = 1 << 26

// parseModel reads the "model" component from r. vocab and merges, the
// bulk of the file, are read in the same pass when "type" (first in files
// written by the library) has already said BPE, else kept raw and read
// afterwards; the small fields go through encoding/json.
func parseModel(r *jsonReader) (*bpeModel, error) {
	const w = "model BPE"
	if r.peek() != '{' {
		return nil, formatErr("model: not an object")
	}
	fields := object{}
	m := &bpeModel{unk: -1, maxID: -1}
	isBPE, vocabDone, mergesDone := false, false, false
	err := r.object(func(key string) error {
		switch {
		case key == "vocab" && isBPE:
			vocabDone = true
			fields[key] = json.RawMessage("{}") // present
			return m.readVocab(r)
		case key == "merges" && vocabDone:
			mergesDone = true
			fields[key] = json.RawMessage("[]")
			return m.readMerges(r)
		}
		v, err := r.value()
		if err != nil {
			return err
		}
		fields[key] = v
		if key == "type" {
			typ, err := fields.typ("model")
			if err != nil {
				return err
			}
			if typ != "BPE" {
				return unsupportedErr("model type %q (only BPE)", typ)
			}
			isBPE = true
		}
		return nil
	})
	if err != nil {
		return nil, wrapFormat("model", err)
	}
	if _, ok := fields["type"]; !ok {
		return nil, unsupportedErr("model without a type")
	}
	if err := fields.only(w, "dropout", "unk_token", "continuing_subword_prefix",
		"end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"); err != nil {
		return nil, err
	}
	var (
		dropout              *float64
		unkToken, prefix, sf *string
	)
	for _, e := range []struct {
		key string
		v   any
	}{
		{"dropout", &dropout}, {"unk_token", &unkToken}, {"continuing_subword_prefix", &prefix},
		{"end_of_word_suffix", &sf}, {"fuse_unk", &m.fuseUnk}, {"byte_fallback", &m.byteFallback},
		{"ignore_merges", &m.ignoreMerges},
	} {
		if err := fields.get(w, e.key, e.v, true); err != nil {
			return nil, err
		}
	}
	if dropout != nil && *dropout != 0 {
		return nil, unsupportedErr("%s: dropout %v (only null: dropout is random)", w, *dropout)
	}
	if prefix != nil {
		return nil, unsupportedErr("%s: continuing_subword_prefix", w)
	}
	if sf != nil {
		return nil, unsupportedErr("%s: end_of_word_suffix", w)
	}
	if isNull(fields["vocab"]) {
		return nil, formatErr("%s: no vocab", w)
	}
	if isNull(fields["merges"]) {
		return nil, formatErr("%s: no merges", w)
	}
	if !vocabDone {
		if err := m.readVocab(&jsonReader{b: fields["vocab"]}); err != nil {
			return nil, wrapFormat("model", err)
		}
	}
	if !mergesDone {
		if err := m.readMerges(&jsonReader{b: fields["merges"]}); err != nil {
			return nil, wrapFormat("model", err)
		}
	}
	if err := m.finish(); err != nil {
		return nil, err
	}
	if unkToken != nil {
		id, ok := m.vocab[*unkToken]
		if !ok {
			return nil, formatErr("%s: unk_token %q not in the vocabulary", w, *unkToken)
		}
		m.unk = id
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = int32(id)
		}
	}
	return m, nil
}

// readVocab reads {"token": id, ...}.
func (m *bpeModel) readVocab(r *jsonReader) error {
	if r.peek() != '{' {
		return fmt.Errorf("vocab: not an object")
	}
	m.vocab = make(map[string]int, (len(r.b)-r.i)/32)
	err := r.object(func(key string) error {
		id, err := r.uint(maxVocabID)
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		m.vocab[key] = id
		return nil
	})
	if err != nil {
		return fmt.Errorf("vocab: %w", err)
	}
	return nil
}

// finish builds the id tables. Ids must be distinct and not too sparse.
func (m *bpeModel) finish() error {
	const w = "model BPE: vocab"
	for _, id := range m.vocab {
		m.maxID = max(m.maxID, id)
	}
	if limit := 2*len(m.vocab) + 256; m.maxID >= limit {
		return formatErr("%s: ids up to %d for %d tokens: too sparse", w, m.maxID, len(m.vocab))
	}
	m.tokens = make([]string, m.maxID+1)
	m.known = make([]bool, m.maxID+1)
	for s, id := range m.vocab {
		if m.known[id] {
			a, b := m.tokens[id], s
			if b < a {
				a, b = b, a
			}
			return formatErr("%s: id %d given to both %q and %q", w, id, a, b)
		}
		m.tokens[id] = s
		m.known[id] = true
	}
	return nil
}

// readMerges reads merges as [["a","b"], ...] or, in the legacy form, as
// ["a b", ...] (one form throughout), after the vocabulary. A later
// duplicate of a pair replaces the earlier one, as in the library.
func (m *bpeModel) readMerges(r *jsonReader) error {
	if r.peek() != '[' {
		return fmt.Errorf("merges: not a list")
	}
	m.merges = make(map[uint64]uint64, (len(r.b)-r.i)/32)
	legacy := false
	var bufA, bufB, bufAB []byte
	err := r.array(func(rank int) error {
		if rank >= 1<<31-1 {
			return fmt.Errorf("too many merges")
		}
		var a, b []byte
		c := r.peek()
		switch {
		case c == '"' && (rank == 0 || legacy):
			legacy = true
			line, err := r.str()
			if err != nil {
				return err
			}
			sa, sb, err := m.splitLegacyMerge(line)
			if err != nil {
				return fmt.Errorf("[%d] %q: %w", rank, line, err)
			}
			a, b = []byte(sa), []byte(sb)
		case c == '[' && !legacy:
			n := 0
			err := r.array(func(k int) error {
				var err error
				switch k {
				case 0:
					a, err = r.strBytes(&bufA)
				case 1:
					b, err = r.strBytes(&bufB)
				default:
					return fmt.Errorf("[%d]: more than two parts", rank)
				}
				n++
				return err
			})
			if err != nil {
				return err
			}
			if n != 2 {
				return fmt.Errorf("[%d]: %d parts, want 2", rank, n)
			}
		default:
			return fmt.Errorf("[%d]: want a pair of strings or a string, like the other merges", rank)
		}
		ia, ok := m.vocab[string(a)]
		if !ok {
			return fmt.Errorf("[%d]: %q not in the vocabulary", rank, a)
		}
		ib, ok := m.vocab[string(b)]
		if !ok {
			return fmt.Errorf("[%d]: %q not in the vocabulary", rank, b)
		}
		bufAB = append(append(bufAB[:0], a...), b...)
		merged, ok := m.vocab[string(bufAB)]
		if !ok {
			return fmt.Errorf("[%d]: %q not in the vocabulary", rank, bufAB)
		}
		m.merges[pairKey(int32(ia), int32(ib))] = uint64(rank)<<32 | uint64(merged)
		return nil
	})
	if err != nil {
		return fmt.Errorf("merges: %w", err)
	}
	return nil
}

// splitLegacyMerge splits "a b". With more than one space, the one cut whose
// parts and concatenation are all in the vocabulary is taken.
func (m *bpeModel) splitLegacyMerge(line string) (string, string, error) {
	n := strings.Count(line, " ")
	if n == 0 {
		return "", "", fmt.Errorf("no space")
	}
	if n == 1 {
		a, b, _ := strings.Cut(line, " ")
		return a, b, nil
	}
	var fa, fb string
	found := false
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' {
			continue
		}
		a, b := line[:i], line[i+1:]
		_, okA := m.vocab[a]
		_, okB := m.vocab[b]
		_, okAB := m.vocab[a+b]
		if okA && okB && okAB {
			if found {
				return "", "", fmt.Errorf("ambiguous")
			}
			fa, fb, found = a, b, true
		}
	}
	if !found {
		return "", "", fmt.Errorf("no split matches the vocabulary")
	}
	return fa, fb, nil
}

// symbol is one element of a word being merged: a doubly linked list inside
// a slice, as in the library.
type symbol struct {
	id         int32
	prev, next int32 // -1 at the ends
	size       int32 // byte length; 0 once merged into its left neighbour
}

type mergeItem struct {
	pos, rank, id int32
}

// bpeWork holds the scratch buffers of one word.
type bpeWork struct {
	syms []symbol
	heap []mergeItem
}

var workPool = sync.Pool{New: func() any { return new(bpeWork) }}

func (w *bpeWork) add(id int32, size int) {
	n := int32(len(w.syms))
	prev := int32(-1)
	if n > 0 {
		w.syms[n-1].next = n
		prev = n - 1
	}
	w.syms = append(w.syms, symbol{id: id, prev: prev, next: -1, size: int32(size)})
}

func itemLess(a, b mergeItem) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

func (w *bpeWork) push(it mergeItem) {
	h := append(w.heap, it)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !itemLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	w.heap = h
}

func (w *bpeWork) pop() mergeItem {
	h := w.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && itemLess(h[r], h[l]) {
			c = r
		}
		if !itemLess(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	w.heap = h
	return top
}

// tokenize appends the ids of one word (a non-empty piece of normalized,
// pre-tokenized text) to ids.
func (m *bpeModel) tokenize(word string, ids []int) []int {
	if word == "" {
		return ids
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(ids, id)
		}
	}
	w := workPool.Get().(*bpeWork)
	w.syms = w.syms[:0]
	w.heap = w.heap[:0]
	m.initial(word, w)
	m.mergeAll(w)
	for _, s := range w.syms {
		if s.size != 0 {
			ids = append(ids, int(s.id))
		}
	}
	if cap(w.syms) <= 1<<16 {
		workPool.Put(w) // keep only modest buffers
	}
	return ids
}

// initial splits a word into its first symbols: one per character found in
// the vocabulary, else one per byte (byte fallback), else the unknown token,
// fused over consecutive unknown characters when fuse_unk is set. As in the
// library, a pending unknown token is only flushed by a character found in
// the vocabulary or by the end of the word. A byte that is not valid UTF-8
// counts as a character of its own.
func (m *bpeModel) initial(word string, w *bpeWork) {
	pending := false
	var unkSize int
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+n]
		i += n
		if id, ok := m.vocab[ch]; ok {
			if pending {
				w.add(int32(m.unk), unkSize)
				pending = false
			}
			w.add(int32(id), n)
			continue
		}
		if m.byteFallback {
			all := true
			for k := 0; k < n; k++ {
				if m.byteIDs[ch[k]] < 0 {
					all = false
					break
				}
			}
			if all {
				for k := 0; k < n; k++ {
					w.add(m.byteIDs[ch[k]], 1)
				}
				continue
			}
		}
		if m.unk < 0 {
			continue // no unknown token: the character is dropped
		}
		switch {
		case pending && m.fuseUnk:
			unkSize += n
		case pending:
			w.add(int32(m.unk), unkSize)
			unkSize = n
		default:
			pending, unkSize = true, n
		}
	}
	if pending {
		w.add(int32(m.unk), unkSize)
	}
}

// mergeAll applies merges by lowest rank, leftmost first, with the queue
// discipline of the library: queue entries are checked against the pair
// currently at their position only through the id the pair merges into.
func (m *bpeModel) mergeAll(w *bpeWork) {
	syms := w.syms
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			w.push(mergeItem{pos: int32(i), rank: int32(v >> 32), id: int32(uint32(v))})
		}
	}
	for len(w.heap) > 0 {
		top := w.pop()
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next == -1 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		v, ok := m.merges[pairKey(cur.id, right.id)]
		if !ok || int32(uint32(v)) != top.id {
			continue
		}
		cur.id = top.id
		cur.size += right.size
		cur.next = right.next
		syms[nextPos].size = 0
		if right.next >= 0 && int(right.next) < len(syms) {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				w.push(mergeItem{pos: cur.prev, rank: int32(v >> 32), id: int32(uint32(v))})
			}
		}
		if cur.next >= 0 && int(cur.next) < len(syms) {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				w.push(mergeItem{pos: top.pos, rank: int32(v >> 32), id: int32(uint32(v))})
			}
		}
	}
}
