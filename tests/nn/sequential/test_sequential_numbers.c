/* Numbers in model files read as Python reads them, which is what PyTorch's
 * modules get: 0x10, 0o20, 0b10000 and 1_6 are the integer 16; 16., 1e1 and
 * .5 are floats, which an integer argument refuses; 0x1p-1 (a C hex float,
 * once read as 0.5 and so padding 0), 016, 1__6 and 16_ are not numbers.
 * Each expectation is what python3 prints for repr(LITERAL). */
#include "testutil.h"

#include "dp/dp.h"

#include <stdio.h>
#include <string.h>

/* Linear(784, LITERAL): its out_features, or -1 when the file is refused. */
static int64_t out_features(const char *literal)
{
    char text[256];
    snprintf(text, sizeof text, "Flatten()\nLinear(784, %s)\n", literal);
    dp_model_def *def = NULL;
    if (dp_model_def_parse(&def, text, "numbers.txt", NULL) != 0)
        return -1;
    int64_t n = def->params[0].shape[0]; /* 0.weight: (out, in) */
    dp_model_def_free(def);
    return n;
}

static void test_python_integers(void **state)
{
    (void)state;
    static const char *const sixteen[] = {"16",   "0x10",  "0X1_0",   "0x_10",
                                          "0o20", "0O2_0", "0b10000", "0b1_0000",
                                          "1_6",  "4*4",   "0x10//1", "-0x10*-1"};
    for (size_t i = 0; i < sizeof sixteen / sizeof *sixteen; i++) {
        if (out_features(sixteen[i]) != 16)
            fail_msg("Linear(784, %s): Python reads 16, got %lld (%s)", sixteen[i],
                     (long long)out_features(sixteen[i]), dp_last_error());
    }
}

static void test_not_python_integers(void **state)
{
    (void)state;
    static const struct {
        const char *literal, *why;
    } refused[] = {
        {"0x1p-1", "not a number Python reads"}, /* SyntaxError: invalid hexadecimal literal */
        {"0x1.8", "not a number Python reads"},  /* SyntaxError: invalid syntax */
        {"0x", "expected a number"},             /* invalid hexadecimal literal */
        {"0xg", "expected a number"},
        {"0b102", "not a number Python reads"},
        {"016", "leading zeros"}, /* leading zeros in decimal integer literals */
        {"0_1", "leading zeros"},
        {"1__6", "not a number Python reads"}, /* invalid decimal literal */
        {"16_", "not a number Python reads"},
        {"1_e1", "not a number Python reads"},
        {"1._5", "not a number Python reads"},
        {"16.", "must be an integer"}, /* 16.0: a float */
        {"1e1", "must be an integer"}, /* 10.0 */
        {"1.6e1", "must be an integer"},
        {"1e1_0", "must be an integer"}, /* 10000000000.0 */
        {".5", "must be an integer"},
        {"1e", "expected a number"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        int64_t n = out_features(refused[i].literal);
        if (n != -1)
            fail_msg("Linear(784, %s): Python refuses it as an integer, got %lld",
                     refused[i].literal, (long long)n);
        tu_assert_error_mentions(refused[i].why);
    }
    /* 0 and 00 are Python's zero (refused here as a size of 0). */
    assert_int_equal(out_features("00"), -1);
    tu_assert_error_mentions("must be an integer >= 1");
}

int main(int argc, char **argv)
{
    tu_quiet_log();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_integers),
        cmocka_unit_test(test_not_python_integers),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
