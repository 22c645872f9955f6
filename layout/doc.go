// Package layout is the quantization policy of dgq: it decides, for every
// tensor of a DiffusionGemma checkpoint, which class it belongs to, which
// storage format it gets and where it lives in a pack's blob.
//
// The pieces, in pipeline order:
//
//   - ParseConfig reads config.json (both the hub form with global_head_dim
//     and the per_layer_config form transformers writes) into a bounded,
//     validated Config; ExpectedText and CheckInventory compare a
//     checkpoint's tensor list with what that config implies.
//   - Classify maps a tensor name to a Class (experts, attn, dense, sc,
//     vision, and the locked classes embed, router, norm, layer_scalar) and,
//     for experts, a Role (gate_up or down).
//   - A Policy is a Profile (bf16, q4, q5, q6, nvfp4, nvfp4x) plus --set
//     overrides (ParseOverride, NewPolicy); Policy.Format resolves the
//     format of a (class, role). Locked classes are always raw.
//   - MakePlan turns a policy and a tensor list into a Plan: every tensor's
//     class, format, encoded size and canonical offset. Non-expert tensors
//     come first (the head), experts last (the tail, starting at
//     ExpertSplit, a multiple of ExpertSplitAlign); every offset is a
//     multiple of TensorAlign. The plan does not depend on input order.
//   - Plan.Summary aggregates a plan per class for dry runs.
//
// The package does no I/O: it parses byte slices and returns plain data, so
// every decision is table-testable without files.
package layout
