#include "json/foreign.hpp"

#include <algorithm>

#include "tensor/tensor.hpp"

namespace normlab {

namespace {

struct Entry {
    const char* name;  // lower case
    const char* ours;
    const char* note;
};

// Only names whose counterpart normlab really has, with the frameworks that use them. A name
// may stand for different things (Keras's "axis" is the channel axis of BatchNormalization and
// the normalized axes of LayerNormalization): the first entry whose counterpart is among the
// candidates wins, so the object's own keys decide.
const Entry kNames[] = {
    // keys of norm objects
    {"epsilon", "eps", "Keras, Flax and ONNX name it so; normlab's is \"eps\""},
    {"variance_epsilon", "eps", "Hugging Face's RMSNorm modules name it so; normlab's is \"eps\""},
    {"groups", "num_groups", "Keras's GroupNormalization names it so; normlab's is \"num_groups\""},
    {"elementwise_affine", "affine", "PyTorch's LayerNorm and RMSNorm name it so; normlab's is \"affine\""},
    {"center", "bias",
     "Keras's flag for the bias beta; in normlab \"affine\": false drops weight and bias, \"bias\": \"zeros\" the bias "
     "alone"},
    {"use_bias", "bias",
     "Flax's flag for the bias; in normlab \"affine\": false drops weight and bias, \"bias\": \"zeros\" the bias alone"},
    {"scale", "weight",
     "Keras's flag for the weight gamma, and Flax's and ONNX's name for gamma itself; normlab's is \"weight\" "
     "(\"affine\": false drops weight and bias, \"weight\": \"ones\" the weight alone)"},
    {"use_scale", "weight",
     "Flax's flag for the weight; in normlab \"affine\": false drops weight and bias, \"weight\": \"ones\" the weight "
     "alone"},
    {"gamma", "weight", "Keras names the weight so; normlab's is \"weight\""},
    {"beta", "bias", "Keras names the bias so; normlab's is \"bias\""},
    {"axis", "channel_axis",
     "Keras's and Flax's BatchNorm and Keras's GroupNormalization name the channel axis so; normlab's is "
     "\"channel_axis\""},
    {"axis", "axes",
     "Keras's LayerNormalization names the list of normalized axes so, normlab's \"axes\"; ONNX's LayerNormalization "
     "names so the first normalized axis: its axis k is normlab's \"axes\" [k, ..., -1]"},
    {"reduction_axes", "axes",
     "Flax's LayerNorm and RMSNorm name them so; normlab's is \"axes\" (Flax's scale and bias follow its "
     "feature_axes: normlab's \"param_axes\")"},
    {"feature_axes", "param_axes",
     "Flax's LayerNorm and RMSNorm name so the axes of their scale and bias; normlab's is \"param_axes\""},
    {"num_features", "channel_axis",
     "PyTorch's BatchNorm and InstanceNorm take the channel count so; normlab reads it from the data's shape at "
     "\"channel_axis\""},
    {"num_channels", "channel_axis",
     "PyTorch's GroupNorm takes the channel count so; normlab reads it from the data's shape at \"channel_axis\""},
    {"group_size", "num_groups",
     "Flax's GroupNorm can give the channels per group so; normlab's is \"num_groups\", the channels / group_size"},
    {"rms_scaling", "type",
     "Keras's LayerNormalization with rms_scaling=True is an RMSNorm: normlab's \"type\": \"rmsnorm\""},
    {"training_mode", "training", "ONNX's BatchNormalization names it so; normlab's is \"training\""},
    {"use_running_average", "training",
     "Flax's BatchNorm flag, the opposite of normlab's \"training\": use_running_average true is \"training\": false"},
    {"decay", "momentum",
     "TensorFlow 1's tf.contrib.layers.batch_norm (TF-Slim's batch_norm) names it so: the old running statistics' "
     "weight; normlab's is \"momentum\", read by the convention: decay 0.99 is momentum 0.99 under \"keras\" and 0.01 "
     "under \"torch\""},
    {"moving_mean", "running_mean", "Keras names it so; normlab's is \"running_mean\""},
    {"moving_variance", "running_var", "Keras names it so; normlab's is \"running_var\""},
    // values: weight initialisations (a stack's "init")
    {"glorot_uniform", "xavier_uniform", "Keras names it so; normlab's is \"xavier_uniform\", PyTorch's name"},
    {"glorot_normal", "xavier_normal",
     "Keras names it so (a normal truncated at 2 std); normlab's \"xavier_normal\" is PyTorch's untruncated "
     "N(0, 2/(fan_in + fan_out))"},
    {"he_normal", "kaiming_normal",
     "Keras names it so (a normal truncated at 2 std); normlab's \"kaiming_normal\" is PyTorch's untruncated "
     "N(0, 2/fan_in)"},
    // values: a stack's activation
    {"linear", "identity", "Keras names the identity activation so; normlab's is \"identity\""},
    // values: conventions and norm types
    {"tensorflow", "keras", "TensorFlow's normalization layers are Keras's; normlab's convention for them is \"keras\""},
    {"tf", "keras", "TensorFlow's normalization layers are Keras's; normlab's convention for them is \"keras\""},
    {"pytorch", "torch", "normlab's name for PyTorch's convention is \"torch\""},
    {"jax", "flax", "normlab's convention for JAX is Flax's, \"flax\""},
    {"batchnormalization", "batchnorm", "Keras and ONNX name it so; normlab's is \"batchnorm\""},
    {"batchnorm1d", "batchnorm", "PyTorch names it so; normlab's is \"batchnorm\", for data of any rank"},
    {"batchnorm2d", "batchnorm", "PyTorch names it so; normlab's is \"batchnorm\", for data of any rank"},
    {"batchnorm3d", "batchnorm", "PyTorch names it so; normlab's is \"batchnorm\", for data of any rank"},
    {"syncbatchnorm", "batchnorm",
     "PyTorch names it so; normlab's is \"batchnorm\" with \"replicas\" and \"sync\": true"},
    {"instancenorm1d", "instancenorm", "PyTorch names it so; normlab's is \"instancenorm\", for data of any rank"},
    {"instancenorm2d", "instancenorm", "PyTorch names it so; normlab's is \"instancenorm\", for data of any rank"},
    {"instancenorm3d", "instancenorm", "PyTorch names it so; normlab's is \"instancenorm\", for data of any rank"},
    {"layernormalization", "layernorm", "Keras and ONNX name it so; normlab's is \"layernorm\""},
    {"groupnormalization", "groupnorm", "Keras and ONNX name it so; normlab's is \"groupnorm\""},
    {"instancenormalization", "instancenorm", "ONNX names it so; normlab's is \"instancenorm\""},
    {"rmsnormalization", "rmsnorm", "ONNX names it so; normlab's is \"rmsnorm\""},
};

}  // namespace

ForeignName foreign_name(const std::string& word, const std::vector<std::string>& candidates) {
    const std::string w = lower_case(word);
    // A candidate but for case ("Linear" for the block "linear") is answered by did-you-mean.
    for (const auto& c : candidates)
        if (lower_case(c) == w) return {};
    for (const Entry& e : kNames)
        if (w == e.name && std::find(candidates.begin(), candidates.end(), e.ours) != candidates.end())
            return {e.ours, e.note};
    return {};
}

}  // namespace normlab
