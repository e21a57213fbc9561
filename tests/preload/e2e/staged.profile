# The staged-path test profile (CMakeLists.txt: e2e_staged_*, the tiny
# and random/stale staged variants, the staged fault tests): the
# h100-pcie5 built-in (profile/builtin.c) with driver calls and copy-engine
# setup an order of magnitude cheaper and no launch latency, so that the gate
# stages copies of a few tens of KiB even through small staging buffers
# (IBP_STAGING=256K: 128 KiB each) -- under h100-pcie5 itself a chunk's
# calls (~7 us) cost more than the driver's copy of a 128 KiB buffer's
# worth of tensors (~3 us) -- and a decoder, and SM reads of the tensors
# it reads raw (written ones), far faster than any GPU's, so that the copy
# engine bounds every staged copy, small, of the largest tensors (200 KB,
# a warp each) or of many written tensors: these tests check what the
# staged path does, not when it pays.
name = staged-test
ce_h2d_gbps = 55
ce_d2h_gbps = 55
ce_setup_us = 0.1
runtime_call_us = 0.3
driver_copy_call_us = 0.2
driver_launch_call_us = 0.2
driver_call_us = 0.01
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 0
sm_h2d_gbps = 1000
sm_read_rtt_us = 1.2
sm_inflight_bytes = 32768
sector_bytes = 32
dram_gbps = 2000
decode_gbps_per_sm = 1000
decode_tensor_us = 0
decode_h2d_gbps = 1000
sms = 114
stage_decode_gbps_per_sm = 1000
stage_tensor_us = 0
