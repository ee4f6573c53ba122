/* The backends: one line each, in the order `--devices auto` and
 * `--devices N` prefer them (the first that has devices here, or N of them,
 * is taken; the CPU, whose devices share the host's cores and which always
 * has them, comes last).
 *
 * A backend is its folder src/device/<name>/ and its line here. The folder
 * defines
 *   const dp__device_ops dp__<name>_ops   its device table (device.h), the
 *       kernel entries dp__<name>_<slot> of each op-list line that gives
 *       it the op (op_list.h, DP__OP_BACKEND_SLOTS);
 *   const dp__backend dp__<name>_backend  its entry (device.h): the name
 *       its devices take (<name>:0, <name>:1, ...), how many it has here,
 *       its table, or NULL and why where a build leaves it out.
 * From this list come the ids that the op list's backends column names
 * (DP__BACKEND_<name>), the array of entries behind dp_device_open,
 * dp_devices_open and dp_backend_info (backends.c), and the backends that
 * scripts/check-layers.sh checks. Valid C and C++: op_list.h includes it. */
#ifndef DP_DEVICE_BACKEND_LIST_H
#define DP_DEVICE_BACKEND_LIST_H

/* clang-format off */
#define DP__BACKEND_LIST(X)                                                                       \
    X(cuda)                                                                                       \
    X(cpu)                                                                                        \
    /* a new backend: one line above this one, and its folder */

typedef enum dp__backend_id {
#define DP__BACKEND_ID(name) DP__BACKEND_##name,
    DP__BACKEND_LIST(DP__BACKEND_ID)
#undef DP__BACKEND_ID
    DP__BACKEND_COUNT
} dp__backend_id;
/* clang-format on */

#endif
