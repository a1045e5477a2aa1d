// Package baseline owns the side-by-side check of an outside implementation
// of an amk model (scripts/gpu/torch_baseline.py: HuggingFace
// LlamaForCausalLM on the weights `amkctl export-weights` wrote) against
// amk's own eager oracle, so that a baseline timing is known to be of the
// same model and not of a look-alike.
//
// The file (File, JSON, format "amk-baseline-v1") lists the token fed at
// every position from 0 (the prompt, then the implementation's own greedy
// choices) and the logits it produced there. Check replays exactly those
// inputs through model.Eager with the same weights and compares each
// position's logits at the model dtype's tolerance (vm.Compare); it also
// reports where the two argmaxes differ. Read bounds and validates the file.
package baseline
