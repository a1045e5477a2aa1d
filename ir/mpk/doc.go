// Package mpk reads, checks, translates and writes the task graphs of
// Mirage's persistent kernel (MPK), the task_graph.json its generator writes
// next to the generated CUDA (docs/spec/formats.md §1).
//
// It owns the graph model (Graph, Task, Tensor, Event, EventID), the codec
// (Decode, Encode), the translation both ways between a graph and an amk
// program (ToProgram, ToGraph) and a checker in MPK's own terms (Check). It
// imports only the standard library, ir and ir's JSON codec; the cost model
// ranks an imported graph through its translation (schedule.Predict), wired
// by cmd/amkctl.
//
// # The format, as Mirage writes it
//
// Read from the public mirage-project/mirage repository (src/kernel/runtime.cc,
// include/mirage/persistent_kernel/runtime_header.h and persistent_kernel.cuh,
// scripts/parse_task_graph.py); the repository holds no task_graph.json file
// itself, so amk is checked against the generator's rules and hand-written
// graphs that follow them:
//
//   - The document is {"all_events", "all_tasks", "first_tasks"}, written by
//     nlohmann::json's dump(2): keys of every object sorted, two-space
//     indent. Encode writes the same layout; Decode accepts any key order and
//     ignores unknown keys, as MPK's loader does.
//   - A task: task_type, variant_id, inputs/outputs (each a view: base_ptr,
//     a byte offset, dims, strides in elements, data_type), trigger_event,
//     dependent_event and the metadata request_id, expert_offset, kv_idx,
//     merge_task_offset, task_offset. A TaskDesc holds at most 7 inputs and
//     3 outputs.
//   - An event id is (gpu id << 32) | index, OR-ed with the NVSHMEM tag
//     0x1e00000000000000 for a cross-GPU event; the gpu id is read back as
//     bits 32..47. "No event" is 0x7ffffffffffffffe.
//   - event_type codes are 900 EMPTY, 901 LAUNCH_TASKS, 902
//     LAUNCH_MASSIVE_TASKS, 903 LAUNCH_DEPENDENT_TASKS, 910
//     END_OF_TASK_GRAPH, 911 TERMINATION. An earlier description of the
//     format (docs/spec/formats.md §1) lists 0-5 instead
//     (TERMINATION, LAUNCH_TASKS, END_OF_TASK_GRAPH, EMPTY, MASSIVE,
//     DEPENDENT); both numberings are accepted, one per graph, and written
//     back as read. data_type codes are Mirage's (940 fp16, 941 bf16, 950
//     fp32, 955 int32, ...).
//   - The generator's layout: task 0 is TASK_TERMINATE, task 1
//     TASK_BEGIN_TASK_GRAPH triggering event 1; event 0 is TERMINATION,
//     event 1 is LAUNCH_DEPENDENT_TASKS over every other task ("prelaunch":
//     the ranges of the events between layers are kept but their type is
//     rewritten to EMPTY, and each task's dependent_event names the event it
//     waits for); the last event is END_OF_TASK_GRAPH, triggered by the tasks
//     of the last layer(s). first_tasks lists the first layer's tasks.
//   - The runtime: a worker waits until the counter of its task's
//     dependent_event reaches num_triggers x iteration; a finished task adds
//     one to its trigger_event's counter, and the trigger that completes the
//     count enqueues the event (EMPTY does nothing). A scheduler enqueues a
//     launched range round-robin on its workers' queues;
//     LAUNCH_DEPENDENT_TASKS also advances the scheduler's iteration number.
//     Worker queues are circular: per_worker_queue_len is 8192 in today's
//     runtime, 1024 in the earlier description (CheckOptions.QueueLen
//     defaults to 1024).
//
// # Translation
//
// ToGraph writes an amk program in the generator's layout: the two scaffold
// tasks, then task 2+i for amk task i with task_type 1000+opcode (MPK has no
// kernels for amk's ABI instructions), event 2+c for counter c (EMPTY,
// num_triggers = the threshold its waiters use), buffers as whole-tensor
// views named by buffer name, except that a GEMV/GEMM tile's output view is
// its column (and row) slice. A task with one wait depends on that counter's
// event; a task with several waits depends on a join event that one relay
// task per wait (task_type 1100, TASK_AMK_JOIN) triggers after waiting for
// that counter; every counter nobody waits on gets a relay to
// END_OF_TASK_GRAPH. The relays are appended after the amk tasks, inside
// event 1's range. What MPK has no field for (op, params, labels, SM
// placement, cost hints, buffer kinds and dtypes, target, config, pages,
// meta) goes under the top-level key "amk", which MPK's loader ignores.
// Mirage's scripts/parse_task_graph.py reads such an export (checked by hand
// on the toy export: the summary, events and task views print; amk's task
// types show as UNKNOWN(1003) and the like).
//
// ToProgram inverts that exactly when the "amk" key is present, taking
// operands, out_counter and waits from the graph itself (so an edited graph
// gives an edited program). Any other graph is translated task for task:
// event i is counter i (plus one counter for tasks with no trigger_event),
// task i is amk task i (opcode from the task type where amk has a similar
// one, else NOP; label = the type's name), dependent_event and any
// LAUNCH_TASKS/LAUNCH_MASSIVE_TASKS event whose range holds the task become
// waits with threshold num_triggers, each base_ptr becomes one buffer sized
// to the furthest byte any view reaches (written tensors ACTIVATION, the
// rest WEIGHT) — shaped [rows, cols] when every view of it is a block of
// columns of one row-major matrix, flat otherwise — a projection tile whose
// output view covers columns [a, a+n) of every row keeps them as its
// n_off = a and N_tile = n (so tiles writing disjoint columns are not a
// write-after-write race; a tile writing only some rows stays a write of
// the whole tensor, for which mpk check is the exact test), est_bytes is
// the bytes of the task's views, and meta.mpk
// keeps the task types, metadata, views and the event table, so ToGraph
// writes the same graph back. Such a program serves checking and the cost
// model: its opcodes stand in for MPK's kernels and carry no params, so
// amk's validator rejects it for missing params and its VM cannot run it.
// What does not carry over is an error naming
// the field: an event id naming no event, one event named with two gpu
// ids, two thresholds on one counter, more operands than a TaskDesc holds,
// a task with several waits besides its launching event.
//
// # Checking
//
// Check works on the graph as MPK runs it and names MPK task positions and
// event indices. Structure first: event ids that name no event (event-id),
// events of a gpu the launch does not have, or a dependent_event or
// non-NVSHMEM trigger_event on another gpu than the file's other local
// events (MPK's worker asserts both are its own gpu's) (gpu-id), unknown or mixed
// event_type numberings (event-type), launching ranges or first_tasks
// outside all_tasks (task-range). Then trigger accounting: more triggering
// tasks than num_triggers on an event that orders something
// (extra-trigger: it fires early, and its count runs ahead in later
// iterations). Then one iteration is simulated from the begin task (or, in
// a graph without one, from first_tasks): events that never collect their
// num_triggers are reported with their triggers and waiters, root causes
// first (deadlock); a task launched twice (launch); a launched range whose
// round-robin share exceeds a worker queue (queue-overflow); a second
// LAUNCH_DEPENDENT_TASKS in one pass, or tasks launched before the pass's
// LAUNCH_DEPENDENT_TASKS (iteration). Dependency cycles are found on the
// task-for-task translation with ir's cycle search (cycle). Finally, on a
// graph that neither deadlocks nor cycles, views of one base tensor are
// compared pairwise: two unordered tasks writing overlapping bytes
// (overlap), or a task reading bytes an unordered task writes (race);
// ordered means a path of trigger -> dependent_event/launching-event edges.
//
// A multi-GPU launch has one task_graph.json per gpu. An NVSHMEM event
// collects triggers from every gpu; amk assumes, as Mirage's generator
// writes them, that every gpu's graph is the same up to gpu ids, so the
// triggers arriving at an event are as many as this file's tasks that
// signal it on any gpu, and they arrive when this file's do.
// hand_nvshmem_gpu0.json is such a graph. The worker queues are modelled as
// one scheduler owning every worker, dealing each launched range
// round-robin; a range whose share per worker exceeds the queue length is
// reported (a worker may drain while the range is enqueued, so this is the
// case that can overflow, not one that must).
package mpk
