#pragma once
// "Did you mean ...?": the candidate most similar to a name a user wrote. Similarity ranks every
// candidate (no fixed edit-distance cut-off), so a long misspelling still finds its key:
//   - 1 − (edit distance / longer length), on the part after the last '.' (the key within its section);
//   - an abbreviation: the initials of one name's '_'-separated words spell the other (lerning_rate ~ lr);
//   - containment: one name holds the other (at least 3 characters);
// then × 0.85 when the sections (the part before the last '.') differ. Aliases (names other tools use,
// "train.learning_rate" → "train.lr") are scored like candidates and suggest their target.
#include <map>
#include <string>
#include <vector>

namespace mlalpha {

// Similarity in [0, 1] of two names as described above (1 = equal).
double name_similarity(const std::string& a, const std::string& b);
// The best-scoring candidate (or alias target) with similarity >= min_score; "" when none. Ties keep the
// earlier candidate.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates,
                         const std::map<std::string, std::string>& aliases = {}, double min_score = 0.5);

}  // namespace mlalpha
