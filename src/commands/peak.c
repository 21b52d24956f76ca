// peak.c: `tinygpt peak` (see peak.h).
#include "peak.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "common.h"
#include "fast.h"
#include "fma_peak.h"
#include "json.h"
#include "linear.h"
#include "matmul.h"
#include "rng.h"

// --product ROWS,IN,OUT: how near the peak tinygpt's products come, alone.
// A linear layer's three products, each timed on one thread, as each thread
// runs them on its slice of a training step (model.h's slices):
//   forward          out[N,OC]    = inp[N,C] @ weight[OC,C]^T
//   input gradient   dinp[N,C]    = dout[N,OC] @ weight[OC,C]
//   weight gradient  dweight[OC,C] += dout[N,OC]^T @ inp[N,C]
// each 2 N C OC FLOPs; the best of as many runs as fit in "seconds" (at
// least 3), so a run the machine held up does not count.
typedef struct {
    int rows, in, out;
    double forward, input_gradient, weight_gradient;  // GFLOP/s
} ProductSpeed;

// The six matrices' memory, at most (a product that size takes minutes).
#define PRODUCT_MAX_MB 1024.0

static void parse_product(const Command *cmd, const char *text, ProductSpeed *p) {
    char extra;
    if (sscanf(text, "%d,%d,%d%c", &p->rows, &p->in, &p->out, &extra) != 3 || p->rows < 1 || p->in < 1 ||
        p->out < 1 || p->rows > 65536 || p->in > 65536 || p->out > 65536)
        usage_error(cmd, "--product '%s': expected ROWS,IN,OUT, three whole numbers from 1 to 65536, such as 768,128,2048",
                    text);
    const double N = p->rows, C = p->in, OC = p->out;
    const double mb = 2 * (N * C + OC * C + N * OC) * sizeof(float) / (1024.0 * 1024.0);
    if (mb > PRODUCT_MAX_MB)
        usage_error(cmd, "--product '%s': its six matrices would take %.0f MB, more than the %.0f allowed; give smaller "
                    "ROWS, IN or OUT", text, mb, PRODUCT_MAX_MB);
}

// best_gflops: product "which" (0 forward, 1 input gradient, 2 weight
// gradient) timed as described above (time_products sets the one thread).
static double best_gflops(int which, const ProductSpeed *p, float *const buffers[6], double seconds) {
    float *inp = buffers[0], *weight = buffers[1], *out = buffers[2], *dout = buffers[3], *dinp = buffers[4],
          *dweight = buffers[5];
    const int N = p->rows, C = p->in, OC = p->out;
    double best = 0.0;
    const double start = now_seconds();
    for (int run = 0; run < 3 || now_seconds() - start < seconds; run++) {
        double t = now_seconds();
        if (which == 0) linear_forward(out, inp, weight, NULL, N, C, OC);
        else if (which == 1) linear_backward_input(dinp, dout, weight, N, C, OC);
        else linear_backward_params(dweight, NULL, dout, inp, N, C, OC);
        t = now_seconds() - t;
        if (best == 0.0 || t < best) best = t;
    }
    return 2.0 * N * C * OC / best / 1e9;
}

static void time_products(ProductSpeed *p, double seconds) {
    const size_t N = (size_t)p->rows, C = (size_t)p->in, OC = (size_t)p->out;
    const size_t sizes[6] = {N * C, OC * C, N * OC, N * OC, N * C, OC * C};
    float *buffers[6];
    Rng rng;
    rng_init(&rng, 1);
    for (int b = 0; b < 6; b++) {
        buffers[b] = xcalloc_lines(sizes[b], sizeof(float));
        for (size_t i = 0; i < sizes[b]; i++) buffers[b][i] = rng_uniform(&rng) - 0.5f;
    }
    // One thread: the products then start no team of their own (a team of
    // one is no parallel region to omp_in_parallel, parallel.h).
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    p->forward = best_gflops(0, p, buffers, seconds);
    p->input_gradient = best_gflops(1, p, buffers, seconds);
    p->weight_gradient = best_gflops(2, p, buffers, seconds);
    omp_set_num_threads(threads);
    for (int b = 0; b < 6; b++) xfree_lines(buffers[b]);
}

// print_json: the result as one JSON object on a line (the keys are listed
// in docs/speed-and-memory.md, "The peak"). The CPU's name and vendor come
// from the CPU itself, so they go through json_buf_string's escapes.
static void print_json(const CpuInfo *cpu, int threads, double seconds, double one, double all,
                       const ProductSpeed *product) {
    JsonBuf b = {0};
    json_buf_printf(&b, "{\"cpu\": ");
    json_buf_string(&b, cpu->name, strlen(cpu->name));
    json_buf_printf(&b, ", \"vendor\": ");
    json_buf_string(&b, cpu->vendor, strlen(cpu->vendor));
    json_buf_printf(&b, ", \"family\": %d, \"model\": %d, \"stepping\": %d", cpu->family, cpu->model, cpu->stepping);
    json_buf_printf(&b, ", \"vector_bits\": %d, \"vector_floats\": %d, \"instructions\": ", cpu->vector_bits,
                    cpu->vector_floats);
    json_buf_string(&b, cpu->instructions, strlen(cpu->instructions));
    json_buf_printf(&b, ", \"kernel_path\": ");
    json_buf_string(&b, cpu->kernel_path, strlen(cpu->kernel_path));
    json_buf_printf(&b, ", \"fused\": %s, \"accumulators\": %d", cpu->fused ? "true" : "false", PEAK_ACCUMULATORS);
    json_buf_printf(&b, ", \"l1_data_bytes\": %ld, \"k_block\": %d", l1_data_cache_bytes(), matmul_k_block());
    json_buf_printf(&b, ", \"threads\": %d, \"seconds\": %g, \"gflops_1_thread\": %.3f, \"gflops_all_threads\": %.3f",
                    threads, seconds, one, all);
    if (product)
        json_buf_printf(&b, ", \"product\": {\"rows\": %d, \"in\": %d, \"out\": %d, \"forward\": %.3f, "
                            "\"input_gradient\": %.3f, \"weight_gradient\": %.3f}",
                        product->rows, product->in, product->out, product->forward, product->input_gradient,
                        product->weight_gradient);
    json_buf_printf(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    json_buf_free(&b);
}

int cmd_peak(int argc, char **argv) {
    double seconds = 1.0;  // each measurement's length: the command takes about 2.2 x this
    int threads = 0;       // the "all threads" measurement's team; 0 = OpenMP's default
    bool json = false;     // one JSON object instead of text
    const char *product_shape = NULL;  // --product ROWS,IN,OUT, or none
    Flag flags[] = {
        {"--seconds", FLAG_DOUBLE, &seconds, "S", "seconds each of the two measurements runs (1 thread, then all); longer is steadier", 0.01, 600, false, NULL, NULL},
        threads_flag(&threads, "threads of the second measurement, 0 = OpenMP's default (all cores)"),
        {"--product", FLAG_STRING, &product_shape, "ROWS,IN,OUT", "also time a linear layer's three products (forward, input gradient, weight gradient) on 1 thread, inp[ROWS,IN] and weight[OUT,IN], each the best of its runs over --seconds", 0, 0, false, NULL, NULL},
        {"--json", FLAG_SWITCH, &json, NULL, "print {\"cpu\", \"vendor\", \"family\", \"model\", \"stepping\", \"vector_bits\", \"vector_floats\", \"instructions\", \"kernel_path\", \"fused\", \"accumulators\", \"l1_data_bytes\", \"k_block\", \"threads\", \"seconds\", \"gflops_1_thread\", \"gflops_all_threads\"} and with --product \"product\": {\"rows\", \"in\", \"out\", \"forward\", \"input_gradient\", \"weight_gradient\"} in GFLOP/s", 0, 0, false, NULL, NULL},
    };
    Command cmd = {"peak", NULL,
                   "Measure this CPU's peak: GFLOP/s of a loop of fused multiply-adds that touches no memory, "
                   "on 1 thread and on all threads, with the vectors of the kernel path it runs (TINYGPT_KERNELS caps it); "
                   "and name the CPU and the path. "
                   "With --product, also how fast tinygpt's own products run at one shape, alone.",
                   "tinygpt peak --seconds 2 --json", flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    if (threads == 0) threads = omp_get_max_threads();
    ProductSpeed product = {0};
    if (product_shape) parse_product(&cmd, product_shape, &product);

    CpuInfo cpu;
    peak_cpu_info(&cpu);
    const double one = peak_measure(1, seconds);
    // One thread is also "all" when there is one: measured once.
    const double all = threads == 1 ? one : peak_measure(threads, seconds);
    if (product_shape) time_products(&product, seconds);

    if (json) {
        print_json(&cpu, threads, seconds, one, all, product_shape ? &product : NULL);
    } else {
        printf("cpu: %s (%s, family %d, model %d, stepping %d)\n", cpu.name, cpu.vendor[0] ? cpu.vendor : "unknown vendor",
               cpu.family, cpu.model, cpu.stepping);
        printf("kernels: %s\n", cpu.kernel_path);
        printf("vector: %d bits, %d floats (%s), %s; %d independent chains, no memory in the loop\n", cpu.vector_bits,
               cpu.vector_floats, cpu.instructions, cpu.fused ? "fused multiply-add" : "multiply then add (no FMA)",
               PEAK_ACCUMULATORS);
        const long l1 = l1_data_cache_bytes();
        if (l1 > 0) printf("products: k blocks %d deep (L1 data cache: %ld KB a core)\n", matmul_k_block(), l1 / 1024);
        else printf("products: k blocks %d deep (L1 data cache: not known)\n", matmul_k_block());
        char label[32];
        snprintf(label, sizeof label, "peak, %d thread%s:", threads, threads == 1 ? "" : "s");
        printf("%-18s %8.1f GFLOP/s\n", "peak, 1 thread:", one);
        if (threads != 1) printf("%-18s %8.1f GFLOP/s (%.2fx 1 thread)\n", label, all, all / one);
        if (product_shape)
            printf("product inp[%d,%d] @ weight[%d,%d]^T, 1 thread: forward %.1f GFLOP/s (%.0f%% of 1 thread's peak), "
                   "input gradient %.1f (%.0f%%), weight gradient %.1f (%.0f%%)\n",
                   product.rows, product.in, product.out, product.in, product.forward, 100 * product.forward / one,
                   product.input_gradient, 100 * product.input_gradient / one, product.weight_gradient,
                   100 * product.weight_gradient / one);
    }
    stdout_flush_or_die("the result");
    return 0;
}
