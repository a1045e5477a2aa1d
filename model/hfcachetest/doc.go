// Package hfcachetest lays out a model in a HuggingFace hub cache for a
// test, as huggingface_hub writes one: a repository directory with refs/main
// naming a commit, and the commit's snapshot holding config.json and the
// weights split into shards listed by model.safetensors.index.json, every
// file a link into the repository's blobs/. The tests of every verb that
// takes a HuggingFace id (generate, eval, autoresearch, on the reference
// VM and on the emulator) read the same layout.
package hfcachetest
