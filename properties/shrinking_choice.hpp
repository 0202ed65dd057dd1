// Choices that shrink. RapidCheck's gen::element and gen::weightedElement never shrink (its value is
// shrinkable::just), and gen::weightedOneOf chooses through it, so a failing case kept every feature it
// was drawn with (a decode bug shrank with a QK-norm and a softcap it did not need). These draw exactly
// what RapidCheck's draw for the same Random (so a seed names the same cases as before) and shrink the
// choice towards earlier entries, which the generators list simplest first (none, off, plain).
#pragma once

#include <rapidcheck.h>
#include <rapidcheck/detail/FrequencyMap.h>

#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

namespace attncheck::properties {

// From a list built at run time (a choice narrowed to what an implementation states: the same draws as the
// full list when nothing was taken out of it).
template <typename T>
rc::Gen<T> weighted_element(const std::vector<std::pair<std::size_t, T>>& pairs) {
  std::vector<std::size_t> weights;
  std::vector<T> elements;
  for (const auto& [weight, element] : pairs) {
    weights.push_back(weight);
    elements.push_back(element);
  }
  return rc::Gen<T>([map = rc::detail::FrequencyMap(weights), elements](const rc::Random& random, int) {
    // The index as rc::gen::weightedElement computes it.
    const std::size_t index = map.lookup(rc::Random(random).next() % map.sum());
    return rc::shrinkable::map(
        rc::shrinkable::shrinkRecur(index, [](std::size_t chosen) { return rc::seq::range<std::size_t>(0, chosen); }),
        [elements](std::size_t chosen) { return elements[chosen]; });
  });
}

template <typename T>
rc::Gen<T> weighted_element(std::initializer_list<std::pair<std::size_t, T>> pairs) {
  return weighted_element(std::vector<std::pair<std::size_t, T>>(pairs));
}

// gen::weightedOneOf with the choice of generator shrinking towards earlier ones.
template <typename T>
rc::Gen<T> weighted_one_of(std::initializer_list<std::pair<std::size_t, rc::Gen<T>>> pairs) {
  return rc::gen::join(weighted_element<rc::Gen<T>>(pairs));
}

// gen::elementOf a vector (equal chances; the same draw for the same Random), shrinking towards the first.
template <typename T>
rc::Gen<T> element_of(const std::vector<T>& elements) {
  return rc::Gen<T>([elements](const rc::Random& random, int) {
    if (elements.empty()) throw rc::GenerationFailure("Cannot pick element from empty container.");
    const std::size_t index = static_cast<std::size_t>(rc::Random(random).next() % elements.size());
    return rc::shrinkable::map(
        rc::shrinkable::shrinkRecur(index, [](std::size_t chosen) { return rc::seq::range<std::size_t>(0, chosen); }),
        [elements](std::size_t chosen) { return elements[chosen]; });
  });
}

// gen::element (equal chances; the same draw for the same Random), shrinking towards the first.
template <typename T, typename... Ts>
rc::Gen<T> element(T first, Ts... rest) {
  return weighted_element<T>({{1, first}, {1, static_cast<T>(rest)}...});
}

}  // namespace attncheck::properties
