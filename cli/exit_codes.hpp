// Exit codes of the attncheck command, the same for every subcommand.
#pragma once

namespace attncheck::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // a check ran and found a difference (or the implementation crashed)
inline constexpr int kExitBadInput = 2;     // bad arguments, config, geometry or TP size
inline constexpr int kExitInternal = 3;     // a bug in attncheck: an unexpected exception

}  // namespace attncheck::cli
