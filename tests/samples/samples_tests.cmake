# Tests of the samples (labels "sim;samples"), included from
# samples/CMakeLists.txt once the sample targets exist (tests/ is configured
# before samples/).  They run every build of every sample on the simulated
# GPU, without libibp:
#
#   samples_<sample>_<case>   the four builds (shared/static runtime x legacy/
#                             per-thread default stream) with the same
#                             arguments: each exits 0, prints the result line
#                             and throughput, and all print the same result
#                             line (bytes, copies, checksum); the driver saw
#                             the copies through the legacy or the per-thread
#                             entry points as built
#   samples_data_files        --save then --data gives the same checksum
#   samples_mismatch          --corrupt: exit 1 and the first differing offset
#   samples_cuda_error        a failing copy (SIMCUDA_FAIL): exit 2 and the
#                             CUDA error string
#   samples_usage             bad command lines: exit 3, one line on stderr
#
# Each run takes well under a second.  With IBP_SAMPLES_RUNTIME=toolkit the
# samples need NVIDIA's driver: the tests are then labelled "gpu;samples"
# and skip (77) where nvidia-smi finds no GPU.

set(samples_test_dir ${PROJECT_SOURCE_DIR}/tests/samples)
if(IBP_SAMPLES_RUNTIME STREQUAL "sim")
  if(NOT TARGET simcuda)
    message(STATUS "samples: no simulated driver (target simcuda); sample tests not registered")
    return()
  endif()
  set(samples_labels "sim;samples")
  set(samples_env "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/sim/lib")
  set(samples_gpu 0)
else()
  set(samples_labels "gpu;samples")
  set(samples_env "IBP_SAMPLES_NEED_GPU=1")
  set(samples_gpu 1)
endif()

# samples_add_test(NAME SCRIPT ARGS...)
function(samples_add_test name script)
  add_test(NAME ${name}
    COMMAND sh ${samples_test_dir}/${script} ${ARGN})
  set_tests_properties(${name} PROPERTIES
    LABELS "${samples_labels}" TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "${samples_env}")
endfunction()

# samples_add_variants(SAMPLE CASE ARGS...)
function(samples_add_variants sample case)
  set(exes)
  foreach(t IN LISTS IBP_SAMPLE_VARIANTS_${sample})
    list(APPEND exes $<TARGET_FILE:${t}>)
  endforeach()
  samples_add_test(samples_${sample}_${case} check_variants.sh
    ${sample} ${samples_gpu} ${exes} ${ARGN})
endfunction()

samples_add_variants(weight_stream bf16 --size 3M --layers 12 --epochs 3 --warmup 1)
samples_add_variants(weight_stream f32_register_touch
  --size 1000003 --layers 7 --epochs 3 --dtype f32 --register --touch 500)
samples_add_variants(weight_stream mallochost_one_layer
  --size 300K --layers 1 --epochs 2 --pin mallochost --seed 7)
samples_add_variants(emb_gather default_stream
  --rows 5000 --dim 64 --batches 6 --batch-rows 300)
samples_add_variants(emb_gather own_stream_register
  --rows 3001 --dim 75 --batches 4 --batch-rows 257 --stream own --register
  --warmup 1)
# 64 blocks made in a ring of 48: the cache wraps
samples_add_variants(kv_offload bf16_window
  --blocks 48 --block-bytes 16K --prefill 24 --steps 40 --window 6 --warmup 2)
samples_add_variants(kv_offload f32_random_register
  --blocks 33 --block-bytes 8K --dtype f32 --prefill 0 --steps 50 --window 7
  --fetch random --register)
# one cudaMemcpyBatchAsync per step, window x layers entries; the slots
# wrap (12 slots, 8 blocks a step)
samples_add_variants(kv_blocks bf16_window
  --blocks 40 --slots 12 --block-tokens 4 --layers 3 --heads 2 --head-dim 64
  --steps 20 --window 8 --warmup 2)
samples_add_variants(kv_blocks fp16_random_register
  --blocks 33 --slots 9 --block-tokens 16 --layers 5 --heads 1 --head-dim 40
  --dtype fp16 --steps 12 --window 9 --fetch random --register)
samples_add_variants(kv_blocks mixed_mallochost
  --blocks 17 --slots 30 --block-tokens 3 --layers 1 --heads 3 --head-dim 7
  --steps 9 --window 5 --fetch mixed --pin mallochost --seed 5)
samples_add_variants(feature_gather generated
  --rows 5000 --dim 100 --batches 6 --batch-nodes 200 --fanout 5 --warmup 1)
samples_add_variants(feature_gather register_wide_fanout
  --rows 20011 --dim 33 --batches 4 --batch-nodes 150 --fanout 40 --register)
# --data: any bytes will do (here a sample binary, rows of 1000 bytes)
samples_add_variants(feature_gather data_file
  --data $<TARGET_FILE:feature_gather> --row-bytes 1000 --batches 3
  --batch-nodes 40 --fanout 6)

set(samples_dir ${CMAKE_BINARY_DIR}/samples)
foreach(case data_files mismatch cuda_error usage)
  samples_add_test(samples_${case} check_behaviour.sh ${case} ${samples_gpu}
    ${samples_dir} ${CMAKE_CURRENT_BINARY_DIR}/samples-work/${case})
endforeach()
# SIMCUDA_FAIL exists only in the simulated driver.
if(samples_gpu)
  set_tests_properties(samples_cuda_error PROPERTIES DISABLED TRUE)
endif()

# ---- under libibp (issue C): every build of each sample, A/B against
# IBP_DISABLE=1, stats must show copies served and space saved.
if(TARGET ibp_preload AND NOT samples_gpu)
  # sample|IBP_REGIONS rule|arguments: the tensor size fits the copies
  # (rows of 64 floats: 256 B), as the gate requires (docs/ARCHITECTURE.md)
  set(libibp_cases
    "weight_stream|min=1M,name=sample|--size 4M --layers 8 --epochs 3"
    "emb_gather|min=1M,name=sample,tensor=256|--rows 20000 --dim 64 --batches 4 --batch-rows 512"
    # compressed at the first fetch, with 48 of 64 blocks made; then blocks
    # are appended into the rest and over the oldest (written tensors)
    "kv_offload|min=1M,name=sample|--blocks 64 --block-bytes 64K --prefill 48 --steps 32 --window 8"
    "feature_gather|min=1M,name=sample|--rows 4096 --dim 256 --batches 4 --batch-nodes 64 --fanout 8"
    # one cudaMemcpyBatchAsync per step: its entries are served by one
    # batched launch (docs/ARCHITECTURE.md "Batched launches")
    "kv_blocks|min=1M,name=sample|--blocks 64 --slots 16 --steps 8 --window 8")
  foreach(case IN LISTS libibp_cases)
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts 0 sample)
    list(GET parts 1 rule)
    list(GET parts 2 args)
    separate_arguments(args UNIX_COMMAND "${args}")
    foreach(t IN LISTS IBP_SAMPLE_VARIANTS_${sample})
      add_test(NAME preload_sample_${t}
        COMMAND sh ${samples_test_dir}/check_libibp.sh
          $<TARGET_FILE:ibp_preload> ${CMAKE_CURRENT_BINARY_DIR}/libibp-work
          ${t} $<TARGET_FILE:${t}> ${args})
      set_tests_properties(preload_sample_${t} PROPERTIES
        LABELS "sim;preload;samples" TIMEOUT 300 SKIP_RETURN_CODE 77
        ENVIRONMENT "${samples_env};SAMPLE_REGIONS=${rule}")
    endforeach()
  endforeach()
  # the gate's choices on the built-in profiles
  add_test(NAME preload_sample_gate
    COMMAND sh ${samples_test_dir}/check_gate.sh $<TARGET_FILE:ibp_preload>
      ${CMAKE_CURRENT_BINARY_DIR}/libibp-work $<TARGET_FILE:weight_stream>
      $<TARGET_FILE:emb_gather>)
  set_tests_properties(preload_sample_gate PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # the gate learns what batched launches cost (serve/choose/)
  add_test(NAME preload_sample_learn
    COMMAND sh ${samples_test_dir}/check_learn.sh $<TARGET_FILE:ibp_preload>
      ${CMAKE_CURRENT_BINARY_DIR}/libibp-learn $<TARGET_FILE:emb_gather>
      $<TARGET_FILE:kv_blocks>
      ${PROJECT_SOURCE_DIR}/profile/truth/h100-pcie5-calls4x.prof
      $<TARGET_FILE:weight_stream>
      ${PROJECT_SOURCE_DIR}/profile/truth/a100-pcie4-calls4x.prof)
  set_tests_properties(preload_sample_learn PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # the gate learns what the driver's part of a batch call costs
  add_test(NAME preload_sample_learn_call
    COMMAND sh ${samples_test_dir}/check_learn_call.sh
      $<TARGET_FILE:ibp_preload> ${CMAKE_CURRENT_BINARY_DIR}/libibp-call
      $<TARGET_FILE:kv_blocks> ${samples_test_dir}/h200_calibrated.profile
      ${samples_test_dir}/h200_batch_truth.profile)
  set_tests_properties(preload_sample_learn_call PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # a set-up probe's call the driver refuses is made again as the
  # application's (serve/batch/batch_rest.c)
  add_test(NAME preload_sample_probe_retry
    COMMAND sh ${samples_test_dir}/check_probe_retry.sh
      $<TARGET_FILE:ibp_preload> ${CMAKE_CURRENT_BINARY_DIR}/libibp-retry
      $<TARGET_FILE:kv_blocks>)
  set_tests_properties(preload_sample_probe_retry PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # the gate finds out a driver cheaper than holding a row (serve/batch/)
  add_test(NAME preload_sample_learn_alone
    COMMAND sh ${samples_test_dir}/check_learn_alone.sh
      $<TARGET_FILE:ibp_preload> ${CMAKE_CURRENT_BINARY_DIR}/libibp-alone
      $<TARGET_FILE:emb_gather> ${samples_test_dir}/h100_call_cheap.profile)
  set_tests_properties(preload_sample_learn_alone PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # a large copy explored on a part of it (serve/substitute.c)
  add_test(NAME preload_sample_explore_part
    COMMAND sh ${samples_test_dir}/check_explore_part.sh
      $<TARGET_FILE:ibp_preload> ${CMAKE_CURRENT_BINARY_DIR}/libibp-part
      $<TARGET_FILE:kv_offload>
      ${PROJECT_SOURCE_DIR}/profile/truth/h100-pcie5-decode4x.prof
      ${PROJECT_SOURCE_DIR}/profile/truth/h100-pcie5-decode3xfast.prof)
  set_tests_properties(preload_sample_explore_part PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # a copy timed as its stream runs dry is not charged for its calls
  add_test(NAME preload_sample_span
    COMMAND sh ${samples_test_dir}/check_span.sh $<TARGET_FILE:ibp_preload>
      ${CMAKE_CURRENT_BINARY_DIR}/libibp-span $<TARGET_FILE:kv_offload>
      ${PROJECT_SOURCE_DIR}/profile/truth/h100-pcie5-linkthird.prof)
  set_tests_properties(preload_sample_span PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
  # one pinned buffer copied again and again (bandwidthTest): one route
  add_test(NAME preload_sample_lone
    COMMAND sh ${samples_test_dir}/check_lone.sh $<TARGET_FILE:ibp_preload>
      ${CMAKE_CURRENT_BINARY_DIR}/libibp-lone $<TARGET_FILE:weight_stream>)
  set_tests_properties(preload_sample_lone PROPERTIES
    LABELS "sim;preload;samples" TIMEOUT 300 ENVIRONMENT "${samples_env}")
endif()
