"""rocketq.broker"""
