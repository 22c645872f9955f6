// Package testmodel embeds the tiny DiffusionGemma checkpoint made by Hugging
// Face transformers 5.17 (see tiny/PROVENANCE.md) and writes it out either as
// a plain snapshot folder or as an exact Hugging Face hub cache entry. The
// demo command and the tests of every package use it; nothing reads files
// outside the repository.
package testmodel
