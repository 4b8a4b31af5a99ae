// Package device holds the stand-in's device models: what executing one
// batch costs and how that cost is paid.
//
// A batch arrives as a tensor of rows × features (the concatenated, padded
// inputs) and leaves as rows × outputs. Two models implement Model:
//
//   - Accelerator: host-side preprocessing of the rows (real float work,
//     sharded over the intra-op pool while holding an inter-op thread), then
//     the device: a single in-order queue whose per-batch time is a stated
//     cost curve (launch cost plus a per-row cost whose efficiency rises
//     with the batch, small random jitter, a penalty on the first
//     executions of each batch size until they are warm), during which no
//     host thread is held, then host-side output projection and splitting.
//     Its memory model refuses batches that do not fit (an OOM at load).
//   - CPU: a small MLP whose layers are real float32 matrix products, each
//     sharded over the intra-op pool, the whole run holding one inter-op
//     thread; the inter-op pool therefore bounds how many batches compute
//     at once, and more threads than cores fight over them.
//
// Runtime is the pair of thread pools TF sizes with
// --tensorflow_intra_op_parallelism and --tensorflow_inter_op_parallelism.
// Its intra-op pool behaves like Eigen's: idle workers spin a while before
// sleeping, so oversubscribed threads burn CPU that other work needs.
//
// The cost of a batch is stated separately from performing it, for
// simulations: AcceleratorSpec.ExecTime and Accelerator.Reserve give the
// device time without sleeping; Calibrate measures what the real host work
// (and, for the CPU model, the real arithmetic) costs by batch size on
// this machine.
package device
