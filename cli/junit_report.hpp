// `attncheck run --junit FILE`: the run's verdicts as JUnit XML, so a CI server shows them natively.
//
// Layout written (tinyxml2):
//   <testsuites name="attncheck run" tests failures errors skipped time>
//     <testsuite name=IMPLEMENTATION tests failures errors skipped time>      one per implementation
//       <testcase classname="attncheck.IMPLEMENTATION" name=GOLDEN time=SECONDS>   one per golden
//         <failure message="worst TENSOR: ULPS ulps ..." type="mismatch">every failing tensor, one line each</failure>
//         <error message="raised: ..." type="crash"/>        the implementation raised (not a verdict on numbers)
//         <error message="no answer: ..." type="no-answer"/>  it gave no answer in time (a worker's timeout)
//         <error message="broken promise: ..." type="broken-promise"/>  it declined what it states it supports
//         <skipped message="unsupported: REASON"/>           it cannot express the golden
//         <skipped message="not stated: REASON"/>            outside its stated capabilities: not run
//         <error message="not checked: WHY" type="not-checked"/>  the golden did not fit in memory: not run
//         <system-out>declined tensors with their reasons</system-out>   passed what it computed, declined some
//         <properties><property name="yardstick" value="yardstick fp32...: stored ..."/></properties>  below fp64
//     <testsuite name="support-matrix">   with ladder goldens: a testcase per rung and implementation,
//       <testcase classname="attncheck.support-matrix.IMPLEMENTATION" name="03 explicit head dim (pass)"/>
#pragma once

#include <string>
#include <vector>

#include "cli/pair_verdict.hpp"
#include "cli/support_matrix.hpp"

namespace attncheck::cli {

// Writes FILE; throws InputError when it cannot be written.
void write_junit(const std::string& path, const std::vector<PairVerdict>& verdicts, const SupportMatrix& matrix = {});

}  // namespace attncheck::cli
