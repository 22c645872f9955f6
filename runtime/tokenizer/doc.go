// Package tokenizer loads a Hugging Face tokenizer.json of the kind Gemma
// models ship (a BPE model with byte fallback, a Replace normalizer, a Split
// pre-tokenizer, a Replace/ByteFallback/Fuse decoder, added and special
// tokens, and a TemplateProcessing post-processor that prepends <bos>) and
// reproduces the Rust `tokenizers` library (0.23) exactly: the same ids and
// token strings from Encode, the same text from Decode.
//
// The encoding pipeline follows the library step by step:
//
//  1. added tokens whose "normalized" flag is false are cut out of the raw
//     text (leftmost-longest match, honouring lstrip, rstrip and
//     single_word);
//  2. every remaining piece is normalized, and added tokens whose
//     "normalized" flag is true are cut out of the normalized pieces;
//  3. the pre-tokenizer splits the remaining pieces into words;
//  4. the BPE model turns each word into tokens: one symbol per character
//     (or one per UTF-8 byte, as <0xXX> tokens, when the character is not in
//     the vocabulary), then merges by rank with the library's priority queue;
//  5. with addSpecial, the post-processor adds its special tokens.
//
// Decoding maps ids to token strings (skipping special tokens on request),
// then runs the decoder chain.
//
// Implemented are the components of Gemma tokenizers: normalizers Replace
// (string pattern), Prepend and Sequence; pre-tokenizers Split (string
// pattern, every behaviour, invert) and Sequence; the BPE model (unk_token,
// fuse_unk, byte_fallback, ignore_merges, merges as pairs or legacy "a b"
// strings; dropout, continuing_subword_prefix and end_of_word_suffix unset);
// decoders Replace (string pattern), ByteFallback, Fuse, Strip and Sequence;
// the TemplateProcessing post-processor; no truncation or padding. Anything
// else, including an unknown field of one of those components, makes Load
// fail with an error wrapping ErrUnsupported that names it: nothing is
// silently ignored.
//
// The tests compare against the library on the Gemma 3 tokenizer, the tiny
// test checkpoint's tokenizer and ten variants of it that exercise every
// setting above (see testdata/README.md). One known divergence: the
// library's Strip decoder (0.23) panics when stop reaches past the start or
// the token is empty; here it returns the rest, possibly empty.
//
// Chat renders one user message in Gemma's turn format, reading the
// conventions (bos, role names, trimming) from tokenizer_config.json's
// chat_template.
//
// A Tokenizer is immutable after Load and safe for concurrent use.
package tokenizer
