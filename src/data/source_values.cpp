// The "values" source: an inline nested list of numbers, for the small examples people
// reason about by hand (nested_numbers, which also reads a parameter given as a nested
// list). Shape = nesting. NaN and infinities are written "nan", "inf", "-inf", as the
// reports write them.
#include "data/source_impl.hpp"
#include "json/text.hpp"

namespace normlab {

namespace {

// The shape is taken from the first element at each depth; fill() then checks that every
// sublist agrees, so a ragged list is reported at the sublist that differs.
Shape nesting_shape(const Json& j, const JsonLocation& loc) {
    if (!j.is_array())
        loc.fail("expected a nested list of numbers, but got " + json_got(j) + bracket_hint(j));
    Shape shape;
    const Json* node = &j;
    JsonLocation at = loc;
    while (node->is_array()) {
        if (node->empty()) at.fail("empty list: every list of a nested list needs at least one element");
        shape.push_back(node->size());
        node = &(*node)[0];
        at = at.child(std::size_t{0});
    }
    return shape;
}

void fill(const Json& j, const JsonLocation& loc, const JsonLocation& first, const Shape& shape,
          std::size_t depth, double*& out) {
    if (depth == shape.size()) {
        if (j.is_array())
            loc.fail("ragged nested list: expected a number here (as at " + first.pointer +
                     "), but got a list");
        const auto v = json_number(j);  // a number, or "nan", "inf", "-inf"
        if (!v) loc.fail("expected a number, but got " + json_got(j) + string_number_note(j));
        *out++ = *v;
        return;
    }
    if (!j.is_array())
        loc.fail("ragged nested list: expected a list of " + count_noun(shape[depth], "element") +
                 " (as at " + first.pointer + "), but got " + json_type_name(j) + " " +
                 j.dump());
    if (j.size() != shape[depth])
        loc.fail("ragged nested list: this list has " + count_noun(j.size(), "element") +
                 ", but " + first.pointer + " has " + std::to_string(shape[depth]));
    for (std::size_t i = 0; i < j.size(); ++i)
        fill(j[i], loc.child(i), first.child(std::size_t{0}), shape, depth + 1, out);
}

}  // namespace

xt::xarray<double> nested_numbers(const Json& j, const JsonLocation& loc) {
    const Shape shape = nesting_shape(j, loc);
    xt::xarray<double> values = xt::xarray<double>::from_shape(shape);
    double* out = values.data();
    fill(j, loc, loc, shape, 0, out);
    return values;
}

SourceData build_values(const std::string&, ObjectReader& r, const DataContext&) {
    SourceData d;
    d.values = nested_numbers(r.required("values"), r.at("values"));
    return d;
}

}  // namespace normlab
