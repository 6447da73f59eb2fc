// The step-parameter buffer (struct loom_step_params in ir/loom_ir.h), bound
// at slot 0 by the builders of per-token ops.
layout(set = 0, binding = 0) readonly buffer StepParams {
    uint pos;
    uint token;
    uint kv_len;
    uint step;
    uint rows;      // rows valid in a multi-token step (1 <= rows <= T); 1 in a decode step
    uint user[11];
} step_params;
