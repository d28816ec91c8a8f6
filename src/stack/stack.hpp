#pragma once
// A residual stack as plain values: where the norm sits in each block (placement), what the
// block's branch F computes, how its weights start. No JSON and no files: the config turns
// its "stacks" section into a StackDef, and whoever binds the stack to data draws or loads
// the weights (stack/model.hpp runs it).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "norm/presets.hpp"
#include "tensor/errors.hpp"
#include "tensor/tensor.hpp"

namespace normlab {

/// Where the norm N sits around the branch F of each block, x_{l-1} -> x_l:
/// pre x + F(N(x)) (Xiong et al. 2020, with a final norm after the last block);
/// post N(x + F(x)) (Vaswani et al. 2017); deepnorm N(alpha x + F(x)) (Wang et al. 2022,
/// "DeepNet"); sandwich x + N2(F(N(x))) (Ding et al. 2021, CogView); none x + F(x);
/// norm_only N(x), a chain of norms with nothing between them.
enum class Placement { pre, post, deepnorm, sandwich, none, norm_only };
/// The branch F: linear x @ W, W (D, D); ffn act(x @ W1) @ W2, W1 (D, H), W2 (H, D);
/// identity F(x) = x.
enum class BlockKind { linear, ffn, identity };
/// The ffn's activation: relu; gelu in its tanh form 0.5 a (1 + tanh(sqrt(2/pi)(a + 0.044715 a^3)))
/// (Hendrycks & Gimpel 2016; PyTorch F.gelu(approximate="tanh")); identity.
enum class Activation { relu, gelu, identity };
/// Initial weight distributions for a (fan_in, fan_out) matrix used as x @ W:
/// xavier_normal N(0, 2/(fan_in+fan_out)), xavier_uniform U(-a, a) with a = sqrt(6/(fan_in+fan_out))
/// (Glorot & Bengio 2010), kaiming_normal N(0, 2/fan_in) (He et al. 2015, ReLU gain, fan_in
/// mode: PyTorch's kaiming_normal_ defaults), normal N(0, std^2).
enum class InitKind { xavier_normal, xavier_uniform, kaiming_normal, normal };

/// A stack that does not fit its data or its own weights. The message names the stack and
/// the data; key() is the stack's key at fault ("weights/w1", "hidden", ...; empty for the
/// stack as a whole), so that a caller that knows where the stack was written can point
/// there (the config module: "file: /stacks/<name>/<key>: message"). data() names the data
/// the stack met when that is what failed, empty otherwise; on_dtype() says the run's dtype
/// is what failed (no half-precision stacks).
class StackError : public InputError {
public:
    StackError(std::string stack, std::string key, const std::string& what, std::string data = {},
               bool on_dtype = false)
        : InputError(what), m_stack(std::move(stack)), m_key(std::move(key)), m_data(std::move(data)),
          m_on_dtype(on_dtype) {}
    const std::string& stack() const { return m_stack; }  ///< StackDef::name
    const std::string& key() const { return m_key; }
    const std::string& data() const { return m_data; }  ///< the data's name, or ""
    bool on_dtype() const { return m_on_dtype; }

private:
    std::string m_stack, m_key, m_data;
    bool m_on_dtype = false;
};

/// Config names of the placements, block kinds, activations and initialisations, in
/// declaration order (for messages and `normlab list`), and the name of one value.
const std::vector<std::string>& placement_names();
const std::vector<std::string>& block_names();
const std::vector<std::string>& activation_names();
const std::vector<std::string>& init_names();
std::string placement_name(Placement p);
std::string block_name(BlockKind b);
std::string activation_name(Activation a);
std::string init_name(InitKind k);

/// How the weights start when none are given.
struct WeightInit {
    InitKind kind = InitKind::xavier_normal;
    double std = 0;  ///< InitKind::normal only
};

/// One distribution to draw a weight matrix from: normal with standard deviation `scale`,
/// or uniform on [-scale, scale).
struct InitDistribution {
    bool uniform = false;
    double scale = 0;
};
/// The distribution of `init` for a matrix of fan_in rows and fan_out columns (see InitKind).
InitDistribution init_distribution(const WeightInit& init, std::size_t fan_in, std::size_t fan_out);

/// DeepNet's constants for an encoder-only or decoder-only stack of `layers` blocks
/// (Wang et al. 2022, table 1): alpha = (2N)^(1/4) scales the residual, beta = (8N)^(-1/4)
/// scales F's initial weights.
double deepnorm_alpha(std::size_t layers);
double deepnorm_beta(std::size_t layers);

/// A residual stack of `layers` blocks, all of the same placement, block and norm.
struct StackDef {
    std::string name;
    std::size_t layers = 1;
    Placement placement = Placement::pre;
    BlockKind block = BlockKind::linear;
    Activation activation = Activation::relu;
    std::size_t hidden = 0;           ///< H, ffn only
    bool final_norm = true;           ///< pre only: y = N(x_L)
    std::optional<double> alpha;      ///< deepnorm; default deepnorm_alpha(layers)
    std::optional<double> beta;       ///< deepnorm; default deepnorm_beta(layers)
    /// The norm every block instantiates (own weight, bias and running statistics per layer
    /// and per position; the weight/bias init applies to every instance). Unused by
    /// placement none.
    NormDef norm;
    WeightInit init;
    /// Given weights, layer axis first, used as given (DeepNorm's beta is not applied):
    /// by weight name ("w" for linear; "w1", "w2" for ffn). Absent ones are drawn from init.
    std::vector<std::pair<std::string, xt::xarray<double>>> given;

    /// alpha for deepnorm, 1 otherwise.
    double residual_scale() const;
    /// beta for deepnorm, 1 otherwise: the factor drawn weights are multiplied by.
    double init_scale() const;
    /// Whether a block has a norm (every placement but none).
    bool has_norm() const { return placement != Placement::none; }
};

/// One weight of a stack: its name and its shape with the layer axis first.
struct WeightSlot {
    std::string name;   ///< "w", "w1", "w2"
    Shape shape;        ///< (L, fan_in, fan_out)
};
/// The weights a stack of feature size D needs, in the order they are drawn:
/// linear {w (L, D, D)}; ffn {w1 (L, D, H), w2 (L, H, D)}; identity and norm_only none.
std::vector<WeightSlot> weight_slots(const StackDef& def, std::size_t features);

/// The weight names a block kind takes ("w"; "w1", "w2"; none).
std::vector<std::string> weight_names(BlockKind b, Placement p);

}  // namespace normlab
