#include "models/optim.hpp"

#include <cmath>

namespace detaudit {

namespace {
Status check(const std::vector<Tensor*>& params, const std::vector<Tensor*>& grads) {
  if (params.size() != grads.size()) return Status::invalid("optimizer: params and grads differ in count");
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i]->size() != grads[i]->size()) return Status::invalid("optimizer: param/grad size mismatch");
  return Status::ok();
}
Status make_state(Backend* be, const std::vector<Tensor*>& params, std::vector<Tensor>* state) {
  if (state->size() == params.size()) return Status::ok();
  state->assign(params.size(), Tensor());
  for (size_t i = 0; i < params.size(); ++i) {
    DETAUDIT_RETURN_IF_ERROR(Tensor::create(be, params[i]->shape(), &(*state)[i]));
    DETAUDIT_RETURN_IF_ERROR((*state)[i].zero());
  }
  return Status::ok();
}
}  // namespace

Status Adam::step(const std::vector<Tensor*>& params, const std::vector<Tensor*>& grads) {
  DETAUDIT_RETURN_IF_ERROR(check(params, grads));
  DETAUDIT_RETURN_IF_ERROR(make_state(be_, params, &m_));
  DETAUDIT_RETURN_IF_ERROR(make_state(be_, params, &v_));
  ++t_;
  // beta^t as a running product in double: no libm, the same bits on every host.
  beta1_t_ *= double(p_.beta1);
  beta2_t_ *= double(p_.beta2);
  AdamParams p = p_;
  p.bias_correction1 = float(1.0 - beta1_t_);
  p.bias_correction2 = float(1.0 - beta2_t_);
  for (size_t i = 0; i < params.size(); ++i)
    DETAUDIT_RETURN_IF_ERROR(
        be_->adam_step(p, params[i]->data(), grads[i]->data(), m_[i].data(), v_[i].data(), params[i]->size()));
  return Status::ok();
}

Status Sgd::step(const std::vector<Tensor*>& params, const std::vector<Tensor*>& grads) {
  DETAUDIT_RETURN_IF_ERROR(check(params, grads));
  DETAUDIT_RETURN_IF_ERROR(make_state(be_, params, &vel_));
  for (size_t i = 0; i < params.size(); ++i)
    DETAUDIT_RETURN_IF_ERROR(be_->sgd_step(p_, params[i]->data(), grads[i]->data(), vel_[i].data(), params[i]->size()));
  return Status::ok();
}

}  // namespace detaudit
