# The batched-launch test profile (CMakeLists.txt: e2e_batch_*): the
# a100-pcie4 built-in (profile/builtin.c) with a decoder far faster than
# any GPU's, so that the gate holds every copy it can batch -- the 2D
# copies of e2e_batch's rows2d case too, whose few rows a measured decode
# rate leaves to the copy engine: these tests check what batching does,
# not when it pays.
name = batch-test
ce_h2d_gbps = 25.5
ce_d2h_gbps = 25.5
ce_setup_us = 1
runtime_call_us = 0.3
driver_copy_call_us = 2.2
driver_launch_call_us = 2.5
driver_call_us = 0.5
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 3
sm_h2d_gbps = 25
sm_read_rtt_us = 1.5
sm_inflight_bytes = 32768
sector_bytes = 32
dram_gbps = 1555
decode_gbps_per_sm = 1000
decode_tensor_us = 0
decode_h2d_gbps = 25
sms = 108
stage_decode_gbps_per_sm = 1000
stage_tensor_us = 0
