"""AMK data flywheel, the (model, gpu, schedule, instruction, measured result) corpus that
trains a learned prior over megakernel schedules. Plain TSV + JSONL: human-readable, git-friendly,
no infra (the AutoKernel discipline)."""
