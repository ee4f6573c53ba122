/* Many processes: dptrain under `mpirun -np 2` trains the same LeNet as one
 * process with the same global batch, with gradient buckets and with
 * pipelines, and over TCP between two network namespaces
 * (test_mpi_failures.c: ranks that die, fail or are stopped). Runs the
 * built dptrain (DP_BUILD_DIR) under Open MPI's mpirun; skips, saying so,
 * in a build without MPI. */
#include "mpiutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void ranks_equal_one_process(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    char one[256], m1[256], path[256], metrics[256];
    snprintf(one, sizeof one, "%s", tu_tmp_path("1x1.safetensors"));
    snprintf(m1, sizeof m1, "%s", tu_tmp_path("1x1.jsonl"));
    assert_int_equal(mu_run(0, "1", one, m1, NULL, log), 0);
    double loss1 = mu_json_number(m1, "train_loss"), acc1 = mu_json_number(m1, "test_acc");

    static const struct {
        int ranks;
        const char *devices, *what;
    } runs[] = {{0, "2", "1 rank x 2 devices"},
                {2, "1", "2 ranks x 1 device"},
                {2, "2", "2 ranks x 2 devices"}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        snprintf(path, sizeof path, "%s", tu_tmp_path("n.safetensors"));
        snprintf(metrics, sizeof metrics, "%s", tu_tmp_path("n.jsonl"));
        assert_int_equal(mu_run(runs[i].ranks, runs[i].devices, path, metrics, NULL, log), 0);
        double d = tu_max_rel_diff(path, one);
        double loss = mu_json_number(metrics, "train_loss"),
               acc = mu_json_number(metrics, "test_acc");
        printf("%-20s vs 1 rank x 1 device: max |difference| / max |param| = %.3g; train loss "
               "%.6f vs %.6f, test acc %.4f vs %.4f\n",
               runs[i].what, d, loss, loss1, acc, acc1);
        tu_assert_at_most(d, MU_VS_ONE_PROCESS);
        /* Every sample counted once: the epoch's mean loss over 1217. */
        tu_assert_close(loss, loss1, MU_VS_ONE_PROCESS, 0);
        tu_assert_close(acc, acc1, 0, 0.0021); /* one test image of 500 */
    }

    /* dptrain eval split over 3 ranks (333 + 334 + 334 images, each rank
     * its chunk of every batch) counts the same as one process. */
    const char *e1[] = {
        tu_dptrain, "eval", "--checkpoint", one, "--limit-test", "1001", "--threads", "1", NULL};
    const char *e3[] = {mu_mpirun, "-np",          "3",    tu_dptrain,  "eval", "--checkpoint",
                        one,       "--limit-test", "1001", "--threads", "1",    NULL};
    assert_int_equal(mu_wait_for(mu_start(e1, log), 60), 0);
    char *out1 = mu_slurp(log);
    assert_int_equal(mu_wait_for(mu_start(e3, log), 60), 0);
    char *out3 = mu_slurp(log);
    printf("eval on 1 process: %s     on 3 ranks: %s", out1, out3);
    assert_non_null(strstr(out1, "test acc: "));
    assert_string_equal(out1, out3);
    free(out1);
    free(out3);
}

/* A modern recipe across ranks: AdamW with weight decay, a cosine schedule
 * after a linear warm-up, clipping by the global norm (after the
 * allreduce), label smoothing and random crops and flips (each sample's
 * draws are a function of the seed and its index in the whole batch, not
 * of the rank that reads it) on 2 ranks x 1 device end where one process
 * on one device does, within float tolerance: the optimizer, the schedule
 * and the clip see the same summed gradient in both, but summed in another
 * order. Adam divides each element by its running RMS, so an element whose
 * gradient is near the rounding of that sum moves by up to lr either way:
 * the bound is 1e-4, ten times SGD's (measured 2.2e-5 after these 20
 * steps; other augmentation draws, crops without the flips, differ by
 * 4e-2 after 2). */
static void recipe_ranks_equal_one_process(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256], one[256], two[256], m1[256], m2[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    snprintf(one, sizeof one, "%s", tu_tmp_path("recipe1.safetensors"));
    snprintf(two, sizeof two, "%s", tu_tmp_path("recipe2.safetensors"));
    snprintf(m1, sizeof m1, "%s", tu_tmp_path("recipe1.jsonl"));
    snprintf(m2, sizeof m2, "%s", tu_tmp_path("recipe2.jsonl"));
    const char *recipe[] = {"--optimizer",
                            "adamw",
                            "--lr",
                            "0.002",
                            "--weight-decay",
                            "0.05",
                            "--lr-schedule",
                            "cosine",
                            "--warmup-steps",
                            "5",
                            "--clip-grad-norm",
                            "0.5",
                            "--label-smoothing",
                            "0.1",
                            "--augment",
                            "crop:2,flip",
                            NULL};
    assert_int_equal(mu_run(0, "1", one, m1, recipe, log), 0);
    assert_int_equal(mu_run(2, "1", two, m2, recipe, log), 0);
    double moved = mu_moved_from_init(one, "lenet", 3);
    double d = tu_max_rel_diff(two, one);
    double loss1 = mu_json_number(m1, "train_loss"), loss2 = mu_json_number(m2, "train_loss");
    printf("AdamW, cosine after warm-up, clip 0.5, smoothing 0.1, crop and flip: 2 ranks x 1 "
           "device vs 1 process: max |difference| / max |param| = %.3g (moved from the initial "
           "weights by %.3g); train loss %.6f vs %.6f\n",
           d, moved, loss2, loss1);
    assert_true(moved > 1e-2);
    tu_assert_at_most(d, 10 * MU_VS_ONE_PROCESS);
    tu_assert_close(loss2, loss1, MU_VS_ONE_PROCESS, 0);
}

/* Gradient buckets across ranks: 2 ranks summing LeNet's gradients in 3
 * buckets (--bucket-mb 0.05: 415272, 100200 and 800 bytes), each bucket's
 * MPI_Iallreduce started while the backward pass goes on, end with the
 * very weights and momentum of one allreduce after the backward pass
 * (--bucket-mb 0): every element is summed over the same 2 ranks in the
 * same order either way, so the checkpoints' tensors are compared to the
 * byte. The weights must have moved from the seed's initial ones, or the
 * equality would prove nothing (after these 20 steps the largest parameter
 * is a bias that started at 0: moved by 1; 1 step moves them by 0.13). */
static void buckets_equal_one_allreduce(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256], one[256], many[256], m_one[256], m_many[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    snprintf(one, sizeof one, "%s", tu_tmp_path("one.safetensors"));
    snprintf(many, sizeof many, "%s", tu_tmp_path("many.safetensors"));
    snprintf(m_one, sizeof m_one, "%s", tu_tmp_path("one.jsonl"));
    snprintf(m_many, sizeof m_many, "%s", tu_tmp_path("many.jsonl"));
    const char *unbucketed[] = {"--bucket-mb", "0", "--verbose", NULL};
    assert_int_equal(mu_run(2, "1", one, m_one, unbucketed, log), 0);
    char *out = mu_slurp(log);
    int buckets_one = mu_count(out, ":   bucket ");
    free(out);
    const char *bucketed[] = {"--bucket-mb", "0.05", "--verbose", NULL};
    assert_int_equal(mu_run(2, "1", many, m_many, bucketed, log), 0);
    out = mu_slurp(log);
    int buckets_many = mu_count(out, ":   bucket ");
    printf("--bucket-mb 0.05 on 2 ranks said:\n%s", out);
    free(out);
    double moved = mu_moved_from_init(many, "lenet", 3);
    double loss_one = mu_json_number(m_one, "train_loss"),
           loss_many = mu_json_number(m_many, "train_loss");
    printf("2 ranks, 20 steps: --bucket-mb 0: %d bucket(s), train loss %.6f; --bucket-mb 0.05: "
           "%d buckets, train loss %.6f; weights moved from the initial ones by max |difference| "
           "/ max |param| = %.3g\n",
           buckets_one, loss_one, buckets_many, loss_many, moved);
    assert_int_equal(buckets_one, 1);
    assert_int_equal(buckets_many, 3);
    assert_true(moved > 1e-2);
    tu_assert_same_tensors(many, one);
    assert_true(loss_one == loss_many);
}

/* Pipelines under mpirun: 2 ranks, each one pipeline of 2 stages with 2
 * micro-batches, train as one process's 2 pipelines on 4 devices, bit for
 * bit (each stage's gradient is the sum of two pipelines' in either case;
 * the last batch, one sample, goes to rank 0's pipeline only). */
static void pipelines_across_ranks(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256], ranks[256], local[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    snprintf(ranks, sizeof ranks, "%s", tu_tmp_path("pipe_ranks.safetensors"));
    snprintf(local, sizeof local, "%s", tu_tmp_path("pipe_local.safetensors"));
    const char *pipe[] = {"--pipeline", "2", "--micro-batches", "2", NULL};
    assert_int_equal(mu_run(2, "2", ranks, NULL, pipe, log), 0);
    assert_int_equal(mu_run(0, "4", local, NULL, pipe, log), 0);
    double moved = mu_moved_from_init(ranks, "lenet", 3);
    printf("2 ranks x 1 pipeline of 2 stages = 1 process x 2 pipelines; weights moved by %.3g\n",
           moved);
    assert_true(moved > 1e-2);
    tu_assert_same_tensors(ranks, local);
}

/* ---- two "machines": network namespaces joined by a veth pair ----------- */

static long long tx_bytes(const char *ns, const char *dev)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ip netns exec %s cat /sys/class/net/%s/statistics/tx_bytes", ns,
             dev);
    FILE *p = popen(cmd, "r");
    long long v = -1;
    if (p) {
        if (fscanf(p, "%lld", &v) != 1)
            v = -1;
        pclose(p);
    }
    return v;
}

/* Two ranks, each in its own network namespace with its own address, Open
 * MPI over TCP between them through a veth pair: mpirun runs in the first
 * namespace and starts the second rank's daemon in the other through a
 * launch agent that stands in for ssh. The closest thing to two machines
 * on one. */
static void two_network_namespaces(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char a[32], b[32], va[16], vb[16], net[32];
    int id = (int)(getpid() % 200) + 20;
    snprintf(a, sizeof a, "dptrain-a%d", (int)getpid());
    snprintf(b, sizeof b, "dptrain-b%d", (int)getpid());
    snprintf(va, sizeof va, "dpa%d", (int)getpid() % 1000000);
    snprintf(vb, sizeof vb, "dpb%d", (int)getpid() % 1000000);
    snprintf(net, sizeof net, "10.231.%d", id);
    int rc = geteuid() == 0 ? mu_sh("ip netns add %s 2>/dev/null", a) : -1;
    if (rc == 0)
        rc = mu_sh("ip netns add %s && ip link add %s type veth peer name %s && "
                   "ip link set %s netns %s && ip link set %s netns %s && "
                   "ip -n %s addr add %s.1/24 dev %s && ip -n %s addr add %s.2/24 dev %s && "
                   "ip -n %s link set %s up && ip -n %s link set %s up && "
                   "ip -n %s link set lo up && ip -n %s link set lo up",
                   b, va, vb, va, a, vb, b, a, net, va, b, net, vb, a, va, b, vb, a, b);
    if (rc != 0) {
        mu_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", a, b);
        tu_skip("two network namespaces joined by a veth pair cannot be made here (needs root "
                "with CAP_SYS_ADMIN and CAP_NET_ADMIN, and iproute2)");
    }
    char agent[256], hosts[256], log[256], one[256], two[256], bf16[256];
    snprintf(agent, sizeof agent, "%s", tu_tmp_path("netns-rsh"));
    snprintf(hosts, sizeof hosts, "%s", tu_tmp_path("hosts"));
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    snprintf(one, sizeof one, "%s", tu_tmp_path("one.safetensors"));
    snprintf(two, sizeof two, "%s", tu_tmp_path("two.safetensors"));
    snprintf(bf16, sizeof bf16, "%s", tu_tmp_path("bf16.safetensors"));
    FILE *f = fopen(agent, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n# ssh HOST COMMAND, where HOST is an address of a namespace\n"
            "host=$1; shift\ncase \"$host\" in\n  %s.1) ns=%s ;;\n  %s.2) ns=%s ;;\n"
            "  *) echo \"netns-rsh: unknown host $host\" >&2; exit 1 ;;\nesac\n"
            "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n",
            net, a, net, b);
    fclose(f);
    chmod(agent, 0755);
    f = fopen(hosts, "w");
    assert_non_null(f);
    fprintf(f, "%s.1 slots=1\n%s.2 slots=1\n", net, net);
    fclose(f);
    /* mpirun in the first namespace, one rank in each, Open MPI's own
     * traffic and the ranks' over the veth pair only. */
    char mpi[2048];
    snprintf(mpi, sizeof mpi,
             "ip netns exec %s %s --hostfile %s --mca plm_rsh_agent %s --mca btl self,tcp "
             "--mca btl_tcp_if_include %s.0/24 --mca oob_tcp_if_include %s.0/24 -np 2",
             a, mu_mpirun, hosts, agent, net, net);

    /* First Open MPI alone, on a program that cannot fail: if it cannot
     * start ranks in the two namespaces (a container's firewall, say), that
     * is this machine's limit, not dptrain's. Past this, any failure is
     * dptrain's. */
    int wired = mu_sh("timeout 60 %s /bin/true > %s 2>&1", mpi, log);
    if (wired != 0) {
        char *out = mu_slurp(log);
        printf("mpirun -np 2 /bin/true across the namespaces: exit %d; it said:\n%s", wired, out);
        free(out);
        mu_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", a, b);
        tu_skip("Open MPI cannot run even /bin/true on ranks in two network namespaces here "
                "(exit %d)",
                wired);
    }

    rc = mu_run(0, "1", one, NULL, NULL, log);
    /* The same 2-rank run twice: float32 gradients, then bfloat16. */
    static const char *const compress[] = {"none", "bf16"};
    const char *ck[] = {two, bf16};
    long long sent[2] = {-1, -1};
    for (int c = 0; c < 2 && rc == 0; c++) {
        long long before = tx_bytes(a, va);
        /* (No leak checks in the ranks under AddressSanitizer: see mu_start().) */
        rc = mu_sh("ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" timeout 120 %s "
                   "%s train --epochs 1 --limit-train 1217 --limit-test 500 --batch-size 64 "
                   "--lr 0.1 --momentum 0.9 --threads 1 --seed 3 --progress never --devices 1 "
                   "--grad-compress %s --checkpoint %s > %s 2>&1",
                   mpi, tu_dptrain, compress[c], ck[c], log);
        sent[c] = tx_bytes(a, va) - before;
        char *out = mu_slurp(log);
        printf("ranks in namespaces %s (%s.1) and %s (%s.2), --grad-compress %s: exit %d, %lld "
               "bytes sent over the veth pair; it said:\n%s",
               a, net, b, net, compress[c], rc, sent[c], out);
        free(out);
    }
    mu_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", a, b);
    assert_int_equal(rc, 0);
    double d = tu_max_rel_diff(two, one);
    printf("2 ranks over TCP vs 1 process: max |difference| / max |param| = %.3g\n", d);
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    /* 20 allreduces of LeNet's 129068 gradients crossed the veth: with 2
     * ranks any allreduce sends at least the whole buffer. */
    assert_true(sent[0] >= 20LL * 129068 * 4);

    /* bf16: each rank sends its 129068 gradients as 2 bytes each (an
     * allgather of 2 ranks) where the float32 allreduce sends 4: half, and
     * a little more for Open MPI's own messages. At least rank 0's share
     * must have crossed. */
    double ratio = (double)sent[1] / (double)sent[0];
    printf("--grad-compress bf16 sent %lld bytes, float32 %lld: %.3f of them\n", sent[1], sent[0],
           ratio);
    assert_true(sent[1] >= 20LL * 129068 * 2);
    tu_assert_at_most(ratio, 0.6);
    /* Each rank's gradient rounded to bfloat16 (8 significant bits: a
     * relative error of at most 2^-8 = 4e-3 per element) changes each
     * step's update by about that fraction, so the weights, which these 20
     * steps move by about the largest one's size (mu_moved_from_init: 1),
     * stay within 1e-2 of the float32 run's (measured 3e-3: the two ranks'
     * rounded gradients partly cancel, and what the errors change in the
     * steps after compounds). Over all parameters together: per tensor
     * (printed too), a bias that started at 0 and is still 1/10 of the
     * largest weight shows the same difference 10x. */
    double dbf = mu_max_param_diff(bf16, two), per_tensor = tu_max_rel_diff(bf16, two);
    printf("2 ranks over TCP, bf16 vs float32 gradients: max |difference| / max |param| = %.3g "
           "(per tensor, the largest: %.3g)\n",
           dbf, per_tensor);
    tu_assert_at_most(dbf, 1e-2);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(ranks_equal_one_process, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(recipe_ranks_equal_one_process, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(buckets_equal_one_allreduce, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(pipelines_across_ranks, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(two_network_namespaces, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, mu_setup, NULL);
}
