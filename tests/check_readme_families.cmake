# The README's family list is what `tpstudio-cli families --markdown` prints (the same data the
# engine opens models with). cmake -DCLI=… -DREADME=… -P check_readme_families.cmake
execute_process(COMMAND ${CLI} families --markdown OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CLI} families --markdown failed (${rc})")
endif()
file(READ ${README} readme)
string(REGEX MATCH "<!-- families: generated[^\n]*-->\n(.*)<!-- families: end -->" block "${readme}")
if(NOT block)
  message(FATAL_ERROR "${README}: no '<!-- families: generated … -->' … '<!-- families: end -->' block")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL generated)
  message(FATAL_ERROR "${README}'s family list is not what 'tpstudio-cli families --markdown' prints now; "
                      "paste its output between the families markers. It prints:\n${generated}")
endif()
