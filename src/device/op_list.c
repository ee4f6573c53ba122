/* The names and cost rules of the op list (device/op_list.h), by op id. */
#include "device/op_list.h"

#include "core/internal.h"

static const char *const names[] = {
#define NAME(name, args, kernels, backends, cost) #name,
    DP__OP_LIST(NAME)
#undef NAME
};
_Static_assert(DP_COUNTOF(names) == DP__OP_COUNT, "a name for every op");

static const dp__op_cost costs[] = {
#define COST(name, args, kernels, backends, cost) DP__COST_##cost,
    DP__OP_LIST(COST)
#undef COST
};
_Static_assert(DP_COUNTOF(costs) == DP__OP_COUNT, "a cost rule for every op");

const char *dp__op_name(dp__op op)
{
    DP_ASSERT((unsigned)op < DP__OP_COUNT);
    return names[op];
}

dp__op_cost dp__op_cost_rule(dp__op op)
{
    DP_ASSERT((unsigned)op < DP__OP_COUNT);
    return costs[op];
}
