export { startWebhooks, type WebhookRoleOptions } from './role.js';
export {
  webhookAdminFor,
  InvalidWebhookError,
  type WebhookAdmin,
  type DeadDelivery,
  type NewSubscription,
} from './admin.js';
export type { Subscription, SubscriptionView } from './subscriptions.js';
