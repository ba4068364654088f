/* The control kernel family's registry list (kernels in control.c): operators that run
 * subgraphs through the executor and so work only inside graphs. */
#include "control.h"
#include "sequence.h"

const struct ops_def *const ops_family_control[] = {
        &ops_if_def,
        &ops_loop_def,
        &ops_scan_def,
        &ops_scan8_def,
        &ops_sequence_map_def,
        &ops_sequence_construct_def,
        &ops_sequence_empty_def,
        &ops_sequence_insert_def,
        &ops_sequence_at_def,
        &ops_sequence_erase_def,
        &ops_sequence_length_def,
        &ops_split_to_sequence_def,
        &ops_concat_from_sequence_def,
        &ops_optional_def,
        &ops_optional_has_element_def,
        &ops_optional_get_element_def,
        NULL,
};
