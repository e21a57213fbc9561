# The profile tests/cli/calibrate.sh gives the simulated GPU (IBP_PROFILE)
# for `ibp calibrate` to recover: every value differs from both built-ins
# but sms, which is the simulated device's own 132 (its clock times kernels
# on the profile's SMs, and the decode rate is measured per SM);
# ce_batch_setup_us is about a fifth of ce_setup_us, so that a batch's
# time over its entries (its first one's setup not taken off) misses it by
# more than 5 %; one SM's output rate (decode_gbps_per_sm) is below its host-read rate
# (sm_inflight_bytes / sm_read_rtt_us = 11.7 GB/s), so a kernel that writes
# what it reads is output-bound on one SM and the calibration has to time
# the reads another way (docs/PROFILE.md, "Calibration").
name = calibrate-target
ce_h2d_gbps = 21.3
ce_d2h_gbps = 18.7
ce_setup_us = 1.7
ce_batch_setup_us = 0.35
runtime_call_us = 0.45
driver_copy_call_us = 3.1
driver_launch_call_us = 4.3
driver_call_us = 0.8
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 4.6
sm_h2d_gbps = 17.9
sm_read_rtt_us = 2.1
sm_inflight_bytes = 24576
sector_bytes = 64
dram_gbps = 1234
decode_gbps_per_sm = 6.5
decode_tensor_us = 0.05
decode_h2d_gbps = 12.3
sms = 132
# the exponent stage's terms: h100-pcie5's (ibp calibrate does not
# measure them yet)
stage_decode_gbps_per_sm = 0.66
stage_tensor_us = 3.64
