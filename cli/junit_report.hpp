// `attncheck run --junit FILE`: the run's verdicts as JUnit XML, so a CI server shows them natively.
//
// Layout written (tinyxml2):
//   <testsuites name="attncheck run" tests failures errors skipped time>
//     <testsuite name=IMPLEMENTATION tests failures errors skipped time>      one per implementation
//       <testcase classname="attncheck.IMPLEMENTATION" name=GOLDEN time=SECONDS>   one per golden
//         <failure message="worst TENSOR: ULPS ulps ..." type="mismatch">every failing tensor, one line each</failure>
//         <error message="raised: ..." type="crash"/>        the implementation raised (not a verdict on numbers)
//         <error message="no answer: ..." type="no-answer"/>  it gave no answer in time (a worker's timeout)
//         <skipped message="unsupported: REASON"/>           it cannot express the golden
//         <system-out>declined tensors with their reasons</system-out>   passed what it computed, declined some
//         <properties><property name="yardstick" value="yardstick fp32...: stored ..."/></properties>  below fp64
#pragma once

#include <string>
#include <vector>

#include "cli/pair_verdict.hpp"

namespace attncheck::cli {

// Writes FILE; throws InputError when it cannot be written.
void write_junit(const std::string& path, const std::vector<PairVerdict>& verdicts);

}  // namespace attncheck::cli
