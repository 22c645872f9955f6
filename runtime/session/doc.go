// Package session loads a pack to run: the overlay loader's proven pack,
// the bound model on the chosen backend (an Engine), the pack's tokenizer
// and generation config; Run and Reply turn a prompt into a reply.
package session
