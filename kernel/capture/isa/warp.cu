// Silicon probes of PTX warp instructions (flashsim.ptx.probes.warp). Each thread reads a, b, c, its member mask
// m and run (0: exit at once; 1 or 2: run the instruction in one of two branches, each branch its own member
// mask); out gets d, outp the predicate (or 0). The second branch feeds a ^ 0x80000000 so that the compiler keeps
// two instructions (two PCs, two member masks) rather than one.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define WARP_PROBE(NAME, ASM)                                                                                  \
    extern "C" __global__ void NAME(const uint32_t* A, const uint32_t* B, const uint32_t* C, const uint32_t* M,  \
                                    const uint32_t* RUN, uint32_t* out, uint32_t* outp) {                      \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                                          \
        uint32_t a = A[i], b = B[i], c = C[i], m = M[i], run = RUN[i], d = 0, p = 0;                            \
        if (run == 0) return;                                                                                   \
        if (run == 1) {                                                                                         \
            asm volatile(ASM : "=r"(d), "=r"(p) : "r"(a), "r"(b), "r"(c), "r"(m));                              \
        } else {                                                                                                \
            asm volatile(ASM : "=r"(d), "=r"(p) : "r"(a ^ 0x80000000u), "r"(b), "r"(c), "r"(m));                \
        }                                                                                                       \
        out[i] = d;                                                                                             \
        outp[i] = p;                                                                                            \
    }

#define SHFL(MODE) "{ .reg .pred q; shfl.sync." MODE ".b32 %0|q, %2, %3, %4, %5; selp.u32 %1, 1, 0, q; }"
WARP_PROBE(shfl_up, SHFL("up"))
WARP_PROBE(shfl_down, SHFL("down"))
WARP_PROBE(shfl_bfly, SHFL("bfly"))
WARP_PROBE(shfl_idx, SHFL("idx"))

// vote: the predicate is bit 0 of a
#define VOTE(MODE, NEG) \
    "{ .reg .pred q, r; and.b32 %0, %2, 1; setp.ne.b32 q, %0, 0; vote.sync." MODE ".pred r, " NEG "q, %5; " \
    "selp.u32 %1, 1, 0, r; mov.u32 %0, 0; }"
WARP_PROBE(vote_all, VOTE("all", ""))
WARP_PROBE(vote_any, VOTE("any", ""))
WARP_PROBE(vote_uni, VOTE("uni", ""))
WARP_PROBE(vote_all_not, VOTE("all", "!"))
WARP_PROBE(vote_uni_not, VOTE("uni", "!"))
WARP_PROBE(vote_ballot, "{ .reg .pred q; and.b32 %0, %2, 1; setp.ne.b32 q, %0, 0; vote.sync.ballot.b32 %0, q, %5; "
                        "mov.u32 %1, 0; }")
WARP_PROBE(vote_ballot_not, "{ .reg .pred q; and.b32 %0, %2, 1; setp.ne.b32 q, %0, 0; "
                            "vote.sync.ballot.b32 %0, !q, %5; mov.u32 %1, 0; }")

// match: a's low 2 bits (few classes, so that lanes match); .b64 from {a & 3, b & 1}
WARP_PROBE(match_any_b32, "{ .reg .b32 k; and.b32 k, %2, 3; match.any.sync.b32 %0, k, %5; mov.u32 %1, 0; }")
WARP_PROBE(match_all_b32, "{ .reg .b32 k; .reg .pred q; and.b32 k, %2, 1; match.all.sync.b32 %0|q, k, %5; "
                          "selp.u32 %1, 1, 0, q; }")
WARP_PROBE(match_any_b64, "{ .reg .b32 k, h; .reg .b64 w; and.b32 k, %2, 3; and.b32 h, %3, 1; mov.b64 w, {k, h}; "
                          "match.any.sync.b64 %0, w, %5; mov.u32 %1, 0; }")
WARP_PROBE(match_all_b64, "{ .reg .b32 k, h; .reg .b64 w; .reg .pred q; and.b32 k, %4, 1; and.b32 h, %3, 0; "
                          "mov.b64 w, {h, k}; match.all.sync.b64 %0|q, w, %5; selp.u32 %1, 1, 0, q; }")

#define REDUX(OP) "redux.sync." OP " %0, %2, %5; mov.u32 %1, 0;"
WARP_PROBE(redux_add_u32, REDUX("add.u32"))
WARP_PROBE(redux_add_s32, REDUX("add.s32"))
WARP_PROBE(redux_min_u32, REDUX("min.u32"))
WARP_PROBE(redux_max_u32, REDUX("max.u32"))
WARP_PROBE(redux_min_s32, REDUX("min.s32"))
WARP_PROBE(redux_max_s32, REDUX("max.s32"))
WARP_PROBE(redux_and_b32, REDUX("and.b32"))
WARP_PROBE(redux_or_b32, REDUX("or.b32"))
WARP_PROBE(redux_xor_b32, REDUX("xor.b32"))

WARP_PROBE(elect, "{ .reg .pred q; elect.sync %0|q, %5; selp.u32 %1, 1, 0, q; }")
WARP_PROBE(activemask, "activemask.b32 %0; mov.u32 %1, 0;")
