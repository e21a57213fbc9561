# What the check_*.cmake scripts share (include()d): the indices of an
# IBP_STATS report's regions named `name`, in `out` -- a name may appear
# several times (freed and re-made regions are kept), or not at all.
#
#   e2e_regions_named("${json}" <name> <out>)
function(e2e_regions_named json name out)
  set(found "")
  string(JSON count LENGTH "${json}" regions)
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON n GET "${json}" regions ${i} name)
      if(n STREQUAL name)
        list(APPEND found ${i})
      endif()
    endforeach()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()
