/* A frontend outside the loom tree, built against an installed loom only
 * (find_package or pkg-config): captures a 3-op graph every step — ROPE at
 * the step's position, MUL by a weight, ADD of the input — compiles it
 * through the runtime's plan cache, replays 10 steps with changing step
 * parameters and input, and checks each step against its own CPU
 * computation, under the validation layer. Exit 0 when all agree. */
#include <loom/loom.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define HEADS 4u
#define HEAD_DIM 64u
#define N (HEADS * HEAD_DIM)
#define STEPS 10u
#define THETA 10000.0f

#define CHECK(expr)                                                                         \
    do {                                                                                    \
        loom_result rc_ = (expr);                                                           \
        if (rc_ != LOOM_OK) {                                                               \
            fprintf(stderr, "%s: %s: %s\n", #expr, loom_result_str(rc_), loom_last_error()); \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

/* y = rope(x, pos) * w + x, as the kernels define it. */
static void reference(const float *x, const float *w, uint32_t pos, float *y)
{
    for (uint32_t h = 0; h < HEADS; h++)
        for (uint32_t i = 0; i < HEAD_DIM / 2; i++) {
            double freq = pow((double)THETA, -2.0 * i / HEAD_DIM), ang = pos * freq;
            uint32_t a = h * HEAD_DIM + i, b = a + HEAD_DIM / 2;
            double r0 = x[a] * cos(ang) - x[b] * sin(ang), r1 = x[a] * sin(ang) + x[b] * cos(ang);
            y[a] = (float)(r0 * w[a] + x[a]);
            y[b] = (float)(r1 * w[b] + x[b]);
        }
}

int main(void)
{
    loom_rt *rt;
    CHECK(loom_rt_create(&(loom_rt_desc){ .validate = true }, &rt));
    loom_rt_buffer *w, *x, *y;
    CHECK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "w", .size = N * 4, .usage = LOOM_USAGE_WEIGHT }, &w));
    CHECK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "x", .size = N * 4, .usage = LOOM_USAGE_INPUT }, &x));
    CHECK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "y", .size = N * 4, .usage = LOOM_USAGE_OUTPUT }, &y));
    float wv[N], xv[N], got[N], want[N];
    for (uint32_t i = 0; i < N; i++)
        wv[i] = 0.5f + (float)(i % 7) * 0.125f;
    CHECK(loom_rt_buffer_write(rt, w, 0, wv, sizeof wv));

    loom_graph *g;
    CHECK(loom_graph_create(&(loom_graph_desc){ .name = "consumer" }, &g));
    int bad = 0, hits = 0;
    for (uint32_t step = 0; step < STEPS; step++) {
        uint32_t pos = 3 * step + 1;
        for (uint32_t i = 0; i < N; i++)
            xv[i] = (float)((i * 37 + step * 11) % 97) / 97.0f - 0.5f;
        CHECK(loom_rt_buffer_write(rt, x, 0, xv, sizeof xv));

        loom_graph_reset(g);
        uint32_t W, X, Y, T, U;
        CHECK(loom_graph_add_buffer(g, &(loom_buffer_desc){ "w", N * 4, LOOM_USAGE_WEIGHT, loom_rt_buffer_id(w) }, &W));
        CHECK(loom_graph_add_buffer(g, &(loom_buffer_desc){ "x", N * 4, LOOM_USAGE_INPUT, loom_rt_buffer_id(x) }, &X));
        CHECK(loom_graph_add_buffer(g, &(loom_buffer_desc){ "y", N * 4, LOOM_USAGE_OUTPUT, loom_rt_buffer_id(y) }, &Y));
        CHECK(loom_graph_add_buffer(g, &(loom_buffer_desc){ "t", N * 4, LOOM_USAGE_SCRATCH, 0 }, &T));
        CHECK(loom_graph_add_buffer(g, &(loom_buffer_desc){ "u", N * 4, LOOM_USAGE_SCRATCH, 0 }, &U));
        CHECK(loom_op_rope(g, loom_vec(X, N), loom_vec(T, N), HEADS, HEAD_DIM, THETA, NULL));
        CHECK(loom_op_mul(g, loom_vec(T, N), loom_vec(W, N), loom_vec(U, N), NULL));
        CHECK(loom_op_add(g, loom_vec(U, N), loom_vec(X, N), loom_vec(Y, N), NULL));

        loom_plan *plan;
        bool hit;
        CHECK(loom_rt_compile(rt, g, NULL, &plan, &hit));
        hits += hit;
        uint64_t done;
        CHECK(loom_rt_replay_plan(rt, plan, &(loom_step_params){ .pos = pos, .kv_len = pos + 1, .step = step, .rows = 1 }, &done));
        CHECK(loom_rt_wait(rt, done));
        loom_plan_release(plan);
        CHECK(loom_rt_buffer_read(rt, y, 0, got, sizeof got));
        reference(xv, wv, pos, want);
        for (uint32_t i = 0; i < N; i++)
            if (fabsf(got[i] - want[i]) > 1e-3f * (1.0f + fabsf(want[i]))) {
                fprintf(stderr, "step %u pos %u: y[%u] = %g, want %g\n", step, pos, i, got[i], want[i]);
                bad = 1;
                break;
            }
    }
    uint64_t messages = loom_rt_validation_messages(rt);
    loom_graph_destroy(g);
    loom_rt_buffer_release(w);
    loom_rt_buffer_release(x);
    loom_rt_buffer_release(y);
    loom_rt_destroy(rt);
    if (messages)
        fprintf(stderr, "%llu validation messages\n", (unsigned long long)messages);
    if (hits != STEPS - 1)
        fprintf(stderr, "%d cache hits in %u steps, want %u\n", hits, STEPS, STEPS - 1);
    printf("consumer (loom %s): %u steps %s\n", LOOM_VERSION_STRING, STEPS, bad || messages ? "FAILED" : "ok");
    return bad || messages || hits != STEPS - 1;
}
