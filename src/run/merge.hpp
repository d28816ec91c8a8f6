#pragma once
// `normlab merge OUT DIR...`: combines the folders of a sharded sweep (--shard I/N) into
// one whose CSVs hold exactly the rows of an unsharded run, in the same order.
#include <string>
#include <vector>

namespace normlab {

/// Merges shard result folders into `out` and prints a one-line summary on stderr. A shard
/// without points (more shards than points) is accepted; so are the shards of a config
/// without a sweep (one point, no point column). Throws InputError when a folder is
/// missing, given twice, or not a normlab sweep or shard result, or its report.json lacks
/// what merge reads (naming the file and the JSON pointer), the shards come from different
/// configs, a point appears twice, is missing or is out of range, or CSV headers differ;
/// EnvError when the output cannot be written.
void merge_results(const std::string& out, const std::vector<std::string>& dirs, bool force);

/// Splits CSV text into records (RFC 4180: quoted fields may hold commas, quotes and line
/// breaks). Each record is returned as its raw text without the final line break.
std::vector<std::string> csv_records(const std::string& text);

}  // namespace normlab
