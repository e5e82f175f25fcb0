# SPDX-License-Identifier: Apache-2.0
# Warnings are errors for ibcni's own targets; third-party headers come in as system headers.
set(IBCNI_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-qual
    -Wmissing-declarations -Werror=unused-result -Werror
    # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+ at -O2
    # (GCC bug 105329); the warning says nothing about ibcni's code.
    -Wno-restrict)

function(ibcni_warnings target)
  target_compile_options(${target} PRIVATE ${IBCNI_WARNINGS})
endfunction()
